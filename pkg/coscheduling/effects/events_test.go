package effects

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

func TestRecorder(t *testing.T) {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "u1"}}
	a, b := st.MakePod().Namespace("ns").Name("a").Obj(), st.MakePod().Namespace("ns").Name("b").Obj()
	tests := []struct {
		name string
		do   func(Recorder)
		want []string
	}{
		{name: "a pod's event", do: func(r Recorder) { r.Pod(a, v1.EventTypeNormal, podgroup.ReasonWaitingForMembers, "1 of 2") },
			want: []string{"Normal WaitingForMembers 1 of 2"}},
		{name: "a PodGroup's event", do: func(r Recorder) { r.PodGroup(pg, v1.EventTypeNormal, podgroup.ReasonQuorumReached, "2 of 2") },
			want: []string{"Normal QuorumReached 2 of 2"}},
		{name: "no PodGroup: no event", do: func(r Recorder) { r.PodGroup(nil, v1.EventTypeNormal, podgroup.ReasonQuorumReached, "x") }},
		{name: "a failure: the PodGroup's, then each member's", do: func(r Recorder) {
			r.Failure(pg, podgroup.ReasonGangRejected, "no node", []*v1.Pod{a, b})
		}, want: []string{"Warning GangRejected no node", "Warning GangRejected no node", "Warning GangRejected no node"}},
		{name: "a failure of a PodGroup gone: the members' only", do: func(r Recorder) {
			r.Failure(nil, podgroup.ReasonGangRejected, "deleted", []*v1.Pod{a})
		}, want: []string{"Warning GangRejected deleted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			tt.do(Recorder{Events: rec})
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("events = %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("event %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
			// Without a recorder nothing is recorded, and nothing panics.
			tt.do(Recorder{})
		})
	}
}

func TestRefNamesThePodGroup(t *testing.T) {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "u1", ResourceVersion: "7"}}
	r := podgroup.Ref(pg)
	if r.Kind != "PodGroup" || r.APIVersion != v1alpha1.SchemeGroupVersion.String() || r.Namespace != "ns" || r.Name != "g" || r.UID != "u1" || r.ResourceVersion != "7" {
		t.Errorf("Ref = %+v", r)
	}
}
