package gang

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// What a member's reservation steps report: the Reserved event of a reservation that starts, and
// the status of a member while its gang holds one.

// ReservedMessage is the Reserved event of the gang of key whose reservation starts with plan p, at
// the gang's priority prio.
func ReservedMessage(key string, p gangfit.ReservationPlan, prio int32) string {
	return fmt.Sprintf("PodGroup %s %s; pods of priority %d or lower are kept off it, and go where they fit beside it", key, p.Message, prio)
}

// Status is what member uid of the gang of key reports while the gang holds its reservation (held
// false: it holds none): the node the reservation nominates it to ("" when none) and the status
// message.
func (r *Reservation) Status(uid types.UID, key string) (node, msg string, held bool) {
	if !r.Held() {
		return "", "", false
	}
	return r.Node[uid], fmt.Sprintf("reservation: PodGroup %s %s since %s, until that room is free", key, r.Plan.Message, r.Since.UTC().Format(time.RFC3339)), true
}

// PostFilter is the PostFilter answer of member uid of the gang of key while the gang holds its
// reservation (held false: it holds none): Unschedulable with its Status message, nominated to the
// node the reservation holds for it, if any.
func (r *Reservation) PostFilter(uid types.UID, key string) (_ *fwk.PostFilterResult, _ *fwk.Status, held bool) {
	node, msg, held := r.Status(uid, key)
	if !held {
		return nil, nil, false
	}
	st := fwk.NewStatus(fwk.Unschedulable, msg)
	if node == "" {
		return nil, st, true
	}
	return framework.NewPostFilterResultWithNominatedNode(node), st, true
}
