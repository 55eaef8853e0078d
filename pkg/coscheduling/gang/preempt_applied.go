package gang

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// What a gang preemption's decision (PreemptOut) leaves its member's PostFilter to do.

// PreemptDecides reports whether a gang preemption's result decides its member's PostFilter: victims
// chosen, the victims of an earlier one still leaving, or a failed read. Otherwise (not eligible, not
// helpful) the gang may reserve room instead.
func PreemptDecides(result string) bool {
	switch result {
	case PreemptVictims, PreemptWaiting, PreemptError:
		return true
	}
	return false
}

// Stopped reports whether preemption cannot place the gang (not eligible, not helpful): its last
// preemption is forgotten (see Gang.StoppedPreempting).
func (out *PreemptOut) Stopped() bool {
	return out.Result == PreemptNotEligible || out.Result == PreemptNotHelpful
}

// Unnominated are the members whose nominations a preemption that cannot place the gang drops (drop)
// when out asks for it (DropNominations) and no reservation holds room for the gang (held, asked only
// then): the gang's members; a job's, only its own group's (own: another group's may be its
// reservation's).
func (out *PreemptOut) Unnominated(in PreemptIn, held func() bool, own func() []*v1.Pod) (members []*v1.Pod, drop bool) {
	switch {
	case !out.DropNominations || held():
		return nil, false
	case in.Job != nil:
		return own(), true
	}
	return in.Members, true
}

// NominatedResult is the PostFilter result of member uid of a gang whose preemption's plan places its
// members (assignment): nominated to the node the plan places it on, nil when it places it nowhere.
func NominatedResult(assignment []gangfit.Nomination, uid types.UID) *fwk.PostFilterResult {
	if node, ok := NodeFor(assignment, uid); ok {
		return framework.NewPostFilterResultWithNominatedNode(node)
	}
	return nil
}
