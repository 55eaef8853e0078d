package podgroup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

func TestMembership(t *testing.T) {
	base := func() *st.PodWrapper {
		return st.MakePod().Namespace("ns").Name("p").SchedulerName("prof").Label(v1alpha1.PodGroupLabel, "g")
	}
	deleting := base().Obj()
	deleting.DeletionTimestamp = &metav1.Time{}
	cases := []struct {
		name           string
		pod            *v1.Pod
		live, member   bool
		keys, liveKeys []string
	}{
		{name: "a pending member", pod: base().Obj(), live: true, member: true, keys: []string{"ns/g"}, liveKeys: []string{"prof|ns/g"}},
		{name: "a running member", pod: base().Phase(v1.PodRunning).Obj(), live: true, member: true, keys: []string{"ns/g"}, liveKeys: []string{"prof|ns/g"}},
		{name: "succeeded", pod: base().Phase(v1.PodSucceeded).Obj(), keys: []string{"ns/g"}},
		{name: "failed", pod: base().Phase(v1.PodFailed).Obj(), keys: []string{"ns/g"}},
		{name: "being deleted", pod: deleting, keys: []string{"ns/g"}},
		{name: "gated: live, not a member yet", pod: base().SchedulingGates([]string{"kueue.x-k8s.io/admission"}).Obj(), live: true, keys: []string{"ns/g"}},
		{name: "no label", pod: st.MakePod().Namespace("ns").Name("p").Obj(), live: true, member: true},
		{name: "an empty label", pod: st.MakePod().Namespace("ns").Name("p").Label(v1alpha1.PodGroupLabel, "").Obj(), live: true, member: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsLive(tc.pod); got != tc.live {
				t.Errorf("IsLive = %v, want %v", got, tc.live)
			}
			if got := IsMember(tc.pod); got != tc.member {
				t.Errorf("IsMember = %v, want %v", got, tc.member)
			}
			keys, _ := IndexFunc(tc.pod)
			if diff := cmp.Diff(tc.keys, keys); diff != "" {
				t.Errorf("IndexFunc (-want,+got): %s", diff)
			}
			liveKeys, _ := LiveIndexFunc(tc.pod)
			if diff := cmp.Diff(tc.liveKeys, liveKeys); diff != "" {
				t.Errorf("LiveIndexFunc (-want,+got): %s", diff)
			}
		})
	}
	if keys, _ := IndexFunc("not a pod"); keys != nil {
		t.Errorf("IndexFunc(not a pod) = %v", keys)
	}
}

func TestMinMember(t *testing.T) {
	for in, want := range map[int32]int{-1: 1, 0: 1, 1: 1, 5: 5} {
		if got := MinMember(&v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{MinMember: in}}); got != want {
			t.Errorf("MinMember(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestMemberKey(t *testing.T) {
	if got, want := MemberKey("prof", "ns", "g"), "prof|"+Key("ns", "g"); got != want {
		t.Errorf("MemberKey = %q, want %q", got, want)
	}
}
