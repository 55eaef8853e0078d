package devices

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// TestTouches: a slice or class event concerns a pending member only when it may change the member's
// devices (issue #59: every slice or class update requeued every pending device member).
func TestTouches(t *testing.T) {
	withModel := func(model string) *resourceapi.DeviceClass { return gpuClass(model) }
	claimed := gangtest.Member("a", "g", "1")
	claim := claimFor(claimed, 1)
	claimed = withClaim(claimed, claim)
	unmade := gangtest.Member("u", "g", "1")
	unmade.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu-template")}}
	otherDriver := slice("n1", "a")
	otherDriver.Spec.Driver = "nic.example.com"
	otherClass := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "nic"}}
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		class *resourceapi.DeviceClass // the member's class in the DRA state
		slice *resourceapi.ResourceSlice
		event *resourceapi.DeviceClass
		want  bool
	}{
		{name: "a slice with a device the member's class selects", pod: claimed, class: withModel("a"), slice: slice("n1", "b", "a"), want: true},
		{name: "a slice of devices its class does not select", pod: claimed, class: withModel("a"), slice: slice("n1", "b", "b")},
		{name: "a slice of another driver", pod: claimed, class: withModel(""), slice: otherDriver},
		{name: "the member's class changed", pod: claimed, class: withModel("a"), event: withModel("b"), want: true},
		{name: "another class changed", pod: claimed, class: withModel("a"), event: otherClass},
		{name: "a member whose claim is not made yet: any slice", pod: unmade, class: withModel("a"), slice: slice("n1", "b"), want: true},
		{name: "a member asking an extended resource its class backs", pod: withExtended(gangtest.Member("e", "g", "1"), "1"), class: withModel("a"), slice: slice("n1", "a"), want: true},
		{name: "... and a slice its class does not select", pod: withExtended(gangtest.Member("e", "g", "1"), "1"), class: withModel("a"), slice: slice("n1", "b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{claim.Namespace + "/" + claim.Name: claim}, classes: map[string]*resourceapi.DeviceClass{class: tc.class}}
			src := &Source{dra: d, cel: newTestCache(), extended: true, matchCache: &matchCache{}}
			if got := src.Touches(tc.pod, tc.slice, tc.event); got != tc.want {
				t.Errorf("Touches = %v, want %v", got, tc.want)
			}
		})
	}
	var none *Source
	if !none.Touches(claimed, slice("n1", "b"), nil) {
		t.Error("without a device model every event concerns the member")
	}
}

// TestClaimers: the pods that may claim devices are those with ResourceClaims or asking for an
// extended resource, in order; the others are left out.
func TestClaimers(t *testing.T) {
	claims := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "claims"}, Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "gpu"}}}}
	extended := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "extended"}, Spec: v1.PodSpec{Containers: []v1.Container{{Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{"example.com/gpu": resource.MustParse("1")}}}}}}
	cpu := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}, Spec: v1.PodSpec{Containers: []v1.Container{{Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}}}}}
	var got []string
	for _, p := range Claimers([]*v1.Pod{cpu, extended, claims}) {
		got = append(got, p.Name)
	}
	if len(got) != 2 || got[0] != "extended" || got[1] != "claims" {
		t.Errorf("Claimers = %v, want [extended claims]", got)
	}
	if Claimers(nil) != nil {
		t.Error("Claimers of none is not nil")
	}
}

// TestChangeHint: a device event requeues a member that may claim devices when it touches them (and
// makes the cached checks stale); a member claiming none, a pod of no group and an event on devices
// the member's classes do not select are skipped.
func TestChangeHint(t *testing.T) {
	claimed := gangtest.Member("a", "g", "1")
	claim := claimFor(claimed, 1)
	claimed = withClaim(claimed, claim)
	plain := withClaim(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: claimed.Namespace, Name: "p"}}, claim)
	type got struct {
		Hint  fwk.QueueingHint
		Freed bool
	}
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		event interface{}
		want  got
	}{
		{name: "a slice with a device the member's class selects", pod: claimed, event: slice("n1", "a"), want: got{Hint: fwk.Queue, Freed: true}},
		{name: "a slice of devices its class does not select", pod: claimed, event: slice("n1", "b"), want: got{Hint: fwk.QueueSkip}},
		{name: "the member's class changed", pod: claimed, event: gpuClass("b"), want: got{Hint: fwk.Queue, Freed: true}},
		{name: "an object of neither kind", pod: claimed, event: claim, want: got{Hint: fwk.Queue, Freed: true}},
		{name: "a member that claims no device", pod: gangtest.Member("c", "g", "1"), event: slice("n1", "a"), want: got{Hint: fwk.QueueSkip}},
		{name: "a pod of no group", pod: plain, event: slice("n1", "a"), want: got{Hint: fwk.QueueSkip}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDRA{claims: map[string]*resourceapi.ResourceClaim{claim.Namespace + "/" + claim.Name: claim}, classes: map[string]*resourceapi.DeviceClass{class: gpuClass("a")}}
			src := &Source{dra: d, cel: newTestCache(), extended: true, matchCache: &matchCache{}}
			var g got
			hint, err := src.ChangeHint(func() { g.Freed = true })(klog.Background(), tc.pod, nil, tc.event)
			if err != nil {
				t.Fatal(err)
			}
			g.Hint = hint
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("ChangeHint (-want,+got):\n%s", diff)
			}
		})
	}
}
