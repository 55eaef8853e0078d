package podgroup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
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

func TestScheduleTimeout(t *testing.T) {
	secs := func(s int32) *int32 { return &s }
	for _, tc := range []struct {
		name string
		spec *int32
		def  time.Duration
		want time.Duration
	}{
		{"unset: the default", nil, time.Minute, time.Minute},
		{"zero: the default", secs(0), time.Minute, time.Minute},
		{"negative: the default", secs(-5), time.Minute, time.Minute},
		{"the PodGroup's", secs(30), time.Minute, 30 * time.Second},
		{"the PodGroup's, capped", secs(3600), time.Minute, MaxScheduleTimeout},
		{"the default, capped", nil, time.Hour, MaxScheduleTimeout},
	} {
		pg := &v1alpha1.PodGroup{Spec: v1alpha1.PodGroupSpec{ScheduleTimeoutSeconds: tc.spec}}
		if got := ScheduleTimeout(pg, tc.def); got != tc.want {
			t.Errorf("%s: ScheduleTimeout = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMemberKey(t *testing.T) {
	if got, want := MemberKey("prof", "ns", "g"), "prof|"+Key("ns", "g"); got != want {
		t.Errorf("MemberKey = %q, want %q", got, want)
	}
}

func TestSpecChanged(t *testing.T) {
	pg := func(name string, uid types.UID, gen int64) *v1alpha1.PodGroup {
		return &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, Generation: gen}}
	}
	for _, tc := range []struct {
		name     string
		old, new interface{}
		want     bool
	}{
		{"created", nil, pg("g", "a", 1), true},
		{"its spec changed", pg("g", "a", 1), pg("g", "a", 2), true},
		{"recreated under its name", pg("g", "a", 1), pg("g", "b", 1), true},
		{"a status-only update", pg("g", "a", 1), pg("g", "a", 1), false},
		{"another PodGroup", nil, pg("h", "a", 1), false},
		{"unstructured, spec changed", &unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"namespace": "ns", "name": "g", "uid": "a", "generation": int64(1)}}},
			&unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"namespace": "ns", "name": "g", "uid": "a", "generation": int64(2)}}}, true},
	} {
		if got, err := SpecChanged("ns", "g", tc.old, tc.new); err != nil || got != tc.want {
			t.Errorf("%s: SpecChanged = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := SpecChanged("ns", "g", nil, "not an object"); err == nil {
		t.Error("SpecChanged of a non-object: no error")
	}
}

// TestHeldReservation: only a True Reserved condition is a reservation held; a False one, another
// condition, or none is not.
func TestHeldReservation(t *testing.T) {
	held := metav1.Condition{Type: ConditionReserved, Status: metav1.ConditionTrue, Message: "holds room on a"}
	for _, tc := range []struct {
		name  string
		conds []metav1.Condition
		want  *metav1.Condition
	}{
		{"none", nil, nil},
		{"held", []metav1.Condition{{Type: ConditionScheduled, Status: metav1.ConditionTrue}, held}, &held},
		{"not held", []metav1.Condition{{Type: ConditionReserved, Status: metav1.ConditionFalse}}, nil},
		{"another condition only", []metav1.Condition{{Type: ConditionScheduled, Status: metav1.ConditionTrue}}, nil},
	} {
		pg := &v1alpha1.PodGroup{Status: v1alpha1.PodGroupStatus{Conditions: tc.conds}}
		got := HeldReservation(pg)
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: HeldReservation = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestSpecChangeHint: a PodGroup event requeues the members of the group it creates or whose spec it
// changes; a status-only update, another group's event and a pod of no group are skipped.
func TestSpecChangeHint(t *testing.T) {
	pg := func(name string, gen int64) *v1alpha1.PodGroup {
		return &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "a", Generation: gen}}
	}
	member := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Labels: map[string]string{v1alpha1.PodGroupLabel: "g"}}}
	plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		old, new interface{}
		want     fwk.QueueingHint
		err      bool
	}{
		{name: "created", pod: member, new: pg("g", 1), want: fwk.Queue},
		{name: "its spec changed", pod: member, old: pg("g", 1), new: pg("g", 2), want: fwk.Queue},
		{name: "a status-only update", pod: member, old: pg("g", 1), new: pg("g", 1), want: fwk.QueueSkip},
		{name: "another PodGroup", pod: member, new: pg("h", 1), want: fwk.QueueSkip},
		{name: "a pod of no group", pod: plain, new: pg("g", 1), want: fwk.QueueSkip},
		{name: "not an object", pod: member, new: "not an object", want: fwk.Queue, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SpecChangeHint(klog.Background(), tc.pod, tc.old, tc.new)
			if got != tc.want || (err != nil) != tc.err {
				t.Errorf("SpecChangeHint = %v, %v; want %v (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}
