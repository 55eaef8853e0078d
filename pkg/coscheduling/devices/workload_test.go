package devices

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
)

// GetPendingAllocation: the fake's allocations in flight (pending, by claim UID).
func (t fakeTracker) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	return t.d.pending[uid]
}

// inTreeGroup is the in-tree PodGroup "pg" of namespace ns with the given claims; made maps a
// template claim's name to the claim the resourceclaim controller made for it (status).
func inTreeGroup(claims []schedulingv1beta1.PodGroupResourceClaim, made map[string]string) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pg", UID: "pg-uid"},
		Spec: schedulingv1beta1.PodGroupSpec{ResourceClaims: claims}}
	for name, claim := range made {
		pg.Status.ResourceClaimStatuses = append(pg.Status.ResourceClaimStatuses,
			schedulingv1beta1.PodGroupResourceClaimStatus{Name: name, ResourceClaimName: ptr.To(claim)})
	}
	return pg
}

func fromTemplate(name, tmpl string) schedulingv1beta1.PodGroupResourceClaim {
	return schedulingv1beta1.PodGroupResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(tmpl)}
}

func named(name, claim string) schedulingv1beta1.PodGroupResourceClaim {
	return schedulingv1beta1.PodGroupResourceClaim{Name: name, ResourceClaimName: ptr.To(claim)}
}

// inGroup is a member of the in-tree PodGroup pg (spec.schedulingGroup) requesting 1 CPU, with the
// pod claims.
func inGroup(name, pg string, claims ...v1.PodResourceClaim) *v1.Pod {
	w := st.MakePod().Namespace("ns").Name(name).UID(name).Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"})
	if pg != "" {
		w = w.PodGroupName(pg)
	}
	return w.PodResourceClaims(claims...).Obj()
}

func podTemplateClaim(name, tmpl string) v1.PodResourceClaim {
	return v1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(tmpl)}
}

func podNamedClaim(name, claim string) v1.PodResourceClaim {
	return v1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To(claim)}
}

// How a member's claim is told to be its PodGroup's, and which ResourceClaim it is (upstream's
// BindTo and NameFromPodGroup).
func TestGroupClaimName(t *testing.T) {
	pg := inTreeGroup([]schedulingv1beta1.PodGroupResourceClaim{fromTemplate("gpus", "group-gpus"), named("fabric", "fabric-claim")},
		map[string]string{"gpus": "pg-gpus-x7k2q"})
	cases := []struct {
		name      string
		pod       *v1.Pod
		pg        *schedulingv1beta1.PodGroup
		wantName  string
		wantGroup bool
		wantErr   error
	}{
		{name: "the same template claim: the claim the controller made for the PodGroup",
			pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus")), pg: pg, wantName: "pg-gpus-x7k2q", wantGroup: true},
		{name: "the same named claim",
			pod: inGroup("m0", "pg", podNamedClaim("fabric", "fabric-claim")), pg: pg, wantName: "fabric-claim", wantGroup: true},
		{name: "the template claim before the controller made it",
			pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus")), pg: inTreeGroup(pg.Spec.ResourceClaims, nil),
			wantGroup: true, wantErr: resourceclaim.ErrClaimNotFound},
		{name: "same name, another template: the pod's own",
			pod: inGroup("m0", "pg", podTemplateClaim("gpus", "my-gpus")), pg: pg},
		{name: "a template where the PodGroup names a claim: the pod's own",
			pod: inGroup("m0", "pg", podTemplateClaim("fabric", "fabric-claim")), pg: pg},
		{name: "another name, same template: the pod's own",
			pod: inGroup("m0", "pg", podTemplateClaim("gpu", "group-gpus")), pg: pg},
		{name: "a member of another PodGroup",
			pod: inGroup("m0", "other", podTemplateClaim("gpus", "group-gpus")), pg: pg},
		{name: "a pod of no PodGroup",
			pod: inGroup("m0", "", podTemplateClaim("gpus", "group-gpus")), pg: pg},
		{name: "no PodGroup read (gate off, API not served)",
			pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus"))},
		{name: "the controller recorded that no claim is needed",
			pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus")), wantGroup: true,
			pg: func() *schedulingv1beta1.PodGroup {
				g := inTreeGroup(pg.Spec.ResourceClaims, nil)
				g.Status.ResourceClaimStatuses = []schedulingv1beta1.PodGroupResourceClaimStatus{{Name: "gpus"}}
				return g
			}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name, group, err := GroupClaimName(tc.pod, tc.pg, &tc.pod.Spec.ResourceClaims[0])
			if name != tc.wantName || group != tc.wantGroup {
				t.Errorf("got (%q, group %v), want (%q, group %v)", name, group, tc.wantName, tc.wantGroup)
			}
			if (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestReadsGroupClaims(t *testing.T) {
	for _, tc := range []struct {
		gate, read, want bool
	}{{true, true, true}, {true, false, false}, {false, true, false}, {false, false, false}} {
		if got := ReadsGroupClaims(tc.gate, tc.read); got != tc.want {
			t.Errorf("gate %v, in-tree read %v: %v, want %v", tc.gate, tc.read, got, tc.want)
		}
	}
}

func TestWholeOnOneNode(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		pending              int
		nodeless             bool
		kindMembers, members int
		want                 bool
	}{
		{name: "a claim to allocate, node-local devices, every member uses it", pending: 1, kindMembers: 4, members: 4, want: true},
		{name: "allocated already: its node selector decides", pending: 0, kindMembers: 4, members: 4},
		{name: "a slice serves several nodes: a relaxation", pending: 1, nodeless: true, kindMembers: 4, members: 4},
		{name: "a mixed gang: a relaxation", pending: 1, kindMembers: 3, members: 4},
	} {
		if got := wholeOnOneNode(tc.pending, tc.nodeless, tc.kindMembers, tc.members); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// groupClaim is the PodGroup's claim of count devices; allocatedOn, when set, is the node its
// allocation pins it to (devices gpu-0.. of that node's pool).
func groupClaim(name string, count int64, allocatedOn string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}}}}}
	if allocatedOn != "" {
		c.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{allocatedOn}}}}}}}
		for i := range count {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: driver, Pool: allocatedOn, Device: fmt.Sprintf("gpu-%d", i)})
		}
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "pg", UID: "pg-uid"}}
	}
	return c
}

// The whole-gang check's counts for a gang of 4 members of the in-tree PodGroup "pg" that use its
// claim "gpus" (from a template; the controller made "pg-gpus"), with or without a claim of their
// own: where the source reads PodGroup claims, the claim is counted once for the gang on the node
// with them; where it does not (the gate off, the API not served), as before: a claim shared by the
// members, left to the real filters.
func TestGroupClaimsCountedOnce(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cases := []struct {
		name string
		// devices per node; nodeless adds a slice of 2 devices that serves every node.
		nodes    map[string]int
		nodeless bool
		// group is the PodGroup's claim (nil: not made yet); own is each member's own claim size (0: none).
		group *resourceapi.ResourceClaim
		// inFlightOn: the group's claim is in flight (allocated, not written yet) on that node.
		inFlightOn string
		own        int64
		// reads is whether the source reads PodGroup claims (gate on, API served).
		reads bool
		limit int
		want  map[string]int // members node n holds, of kind 0
		// kinds and unmodelled: how many kinds, and the members' reason the model leaves them out ("" none).
		kinds      int
		unmodelled string
	}{
		{name: "gate off: a claim the members share, left to the real filters",
			nodes: map[string]int{"n0": 6, "n1": 3}, group: groupClaim("pg-gpus", 2, ""), own: 1, limit: 4,
			want: map[string]int{"n0": 4, "n1": 3}, kinds: 1, unmodelled: "claim pg-gpus is shared with other members"},
		{name: "the group's 2 devices once, beside 1 a member: only the node of 6 holds all 4",
			nodes: map[string]int{"n0": 6, "n1": 3, "n2": 5}, group: groupClaim("pg-gpus", 2, ""), own: 1, reads: true, limit: 4,
			want: map[string]int{"n0": 4, "n1": 0, "n2": 0}, kinds: 1},
		{name: "only the group's claim: any node with its 2 devices holds all 4 (never 2 a member)",
			nodes: map[string]int{"n0": 2, "n1": 1}, group: groupClaim("pg-gpus", 2, ""), reads: true, limit: 4,
			want: map[string]int{"n0": 4, "n1": 0}, kinds: 1},
		{name: "a slice that serves several nodes: a node holds as many as fit (a relaxation)",
			nodes: map[string]int{"n0": 3}, nodeless: true, group: groupClaim("pg-gpus", 2, ""), own: 1, reads: true, limit: 4,
			want: map[string]int{"n0": 3}, kinds: 1},
		{name: "allocated on n0: its devices taken already, the members go only there",
			nodes: map[string]int{"n0": 4, "n1": 4}, group: groupClaim("pg-gpus", 2, "n0"), own: 1, reads: true, limit: 4,
			want: map[string]int{"n0": 2, "n1": 0}, kinds: 1},
		{name: "in flight on n0 (a member waits at Permit): as allocated there, never counted again",
			nodes: map[string]int{"n0": 4, "n1": 4}, group: groupClaim("pg-gpus", 2, ""), inFlightOn: "n0", own: 1, reads: true, limit: 4,
			want: map[string]int{"n0": 2, "n1": 0}, kinds: 1},
		{name: "allocated on n0, no claim of their own: n0 holds every member",
			nodes: map[string]int{"n0": 2, "n1": 4}, group: groupClaim("pg-gpus", 2, "n0"), reads: true, limit: 4,
			want: map[string]int{"n0": 4, "n1": 0}, kinds: 1},
		{name: "the group's claim not made yet: left to the real filters",
			nodes: map[string]int{"n0": 6}, own: 1, reads: true, limit: 4,
			want: map[string]int{"n0": 4}, kinds: 1, unmodelled: "ResourceClaim not created yet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDRA(nil)
			for n, count := range tc.nodes {
				models := make([]string, count)
				for i := range models {
					models[i] = "a"
				}
				d.slices = append(d.slices, slice(n, models...))
			}
			if tc.nodeless {
				d.slices = append(d.slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "net"}, Spec: resourceapi.ResourceSliceSpec{
					Driver: driver, AllNodes: ptr.To(true), Pool: resourceapi.ResourcePool{Name: "net", Generation: 1, ResourceSliceCount: 1},
					Devices: []resourceapi.Device{{Name: "net-0"}, {Name: "net-1"}}}})
			}
			made := map[string]string{}
			if tc.group != nil {
				d.claims["ns/"+tc.group.Name] = tc.group
				made["gpus"] = tc.group.Name
			}
			if tc.inFlightOn != "" {
				// Its devices are allocated in the state (a held claim of the fake), the claim itself shows none.
				pending := groupClaim("pending", 2, tc.inFlightOn).Status.Allocation
				d.pending = map[types.UID]*resourceapi.AllocationResult{tc.group.UID: pending}
				d.claims["other/in-flight"] = &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "in-flight"},
					Status: resourceapi.ResourceClaimStatus{Allocation: pending}}
			}
			pg := inTreeGroup([]schedulingv1beta1.PodGroupResourceClaim{fromTemplate("gpus", "group-gpus")}, made)
			var members []*v1.Pod
			for i := range 4 {
				p := inGroup(fmt.Sprintf("m%d", i), "pg", podTemplateClaim("gpus", "group-gpus"))
				if tc.group != nil {
					// The controller names the PodGroup's claim in each member's status too.
					p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: "gpus", ResourceClaimName: ptr.To(tc.group.Name)})
				}
				if tc.own > 0 {
					c := claimFor(p, tc.own)
					d.claims["ns/"+c.Name] = c
					p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, podTemplateClaim("gpu", "gpu-template"))
					p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: "gpu", ResourceClaimName: ptr.To(c.Name)})
				}
				members = append(members, p)
			}
			src := &Source{dra: d, cel: newTestCache(), extended: true}
			if tc.reads {
				src = src.WithGroupClaims(func(ns, name string) *schedulingv1beta1.PodGroup {
					if ns == pg.Namespace && name == pg.Name {
						return pg
					}
					return nil
				})
			}
			dc := src.ForCheck(logger, members)
			if dc == nil {
				t.Fatal("no device check")
			}
			check := dc.(*Check)
			if check.Kinds() != tc.kinds {
				t.Fatalf("%d kinds, want %d", check.Kinds(), tc.kinds)
			}
			for _, m := range members {
				if got := check.Unmodelled[m.UID]; !strings.Contains(got, tc.unmodelled) || (tc.unmodelled == "") != (got == "") {
					t.Errorf("member %s: unmodelled %q, want %q", m.Name, got, tc.unmodelled)
				}
				if got, want := check.Modelled(m), tc.unmodelled == ""; got != want {
					t.Errorf("member %s: modelled %v, want %v", m.Name, got, want)
				}
			}
			for n, want := range tc.want {
				if got := check.Copies(0, nodeInfo(n, nil), tc.limit); got != want {
					t.Errorf("node %s holds %d members, want %d", n, got, want)
				}
			}
		})
	}
}

// A PodGroup's claim reserved for the PodGroup stays allocated while the PodGroup exists: a
// reservation's plan does not count its devices as freed by the members that leave.
func TestGroupClaimNotFreedByLeavingMembers(t *testing.T) {
	c := groupClaim("pg-gpus", 2, "n0")
	if onlyFor(c, sets.New[types.UID]("m0", "m1", "pg-uid")) {
		t.Error("a claim reserved for a PodGroup counted as freed by leaving pods")
	}
}

// A pod is kept off a held node when its devices do not fit beside the held members' claims and
// their PodGroup's claim, which is waited for once however many members are held there.
func TestKeptOffGroupClaim(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	d := newFakeDRA(map[string]int{"n0": 4})
	group := groupClaim("pg-gpus", 2, "")
	d.claims["ns/"+group.Name] = group
	pg := inTreeGroup([]schedulingv1beta1.PodGroupResourceClaim{fromTemplate("gpus", "group-gpus")}, map[string]string{"gpus": group.Name})
	member := func(name string) *v1.Pod {
		p := inGroup(name, "pg", podTemplateClaim("gpus", "group-gpus"))
		p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To(group.Name)}}
		return p
	}
	// Three members held on n0 wait for the group's 2 devices once (not 6): 2 of 4 stay free.
	held := map[string][]*v1.Pod{"n0": {member("m0"), member("m1"), member("m2")}}
	nodes := map[string]fwk.NodeInfo{"n0": nodeInfo("n0", nil)}
	lookup := func(ns, name string) *schedulingv1beta1.PodGroup {
		if name == pg.Name {
			return pg
		}
		return nil
	}
	src := (&Source{dra: d, cel: newTestCache(), extended: true}).WithGroupClaims(lookup)
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{name: "a claim of 2 fits beside the group's 2", pod: claimer(d, "lone2", "", 2)},
		{name: "a claim of 3 does not", pod: claimer(d, "lone3", "", 3), want: []string{"n0"}},
		{name: "another member of the group takes nothing more", pod: member("m3")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := src.KeptOff(logger, tc.pod, held, func(name string) fwk.NodeInfo { return nodes[name] })
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(sets.New(tc.want...)) {
				t.Errorf("kept off %v, want %v", sets.List(got), tc.want)
			}
		})
	}
}

// Which PodGroup claims are still to allocate, and where the allocated ones keep the members.
func TestPlaceGroupClaims(t *testing.T) {
	n0, n1 := st.MakeNode().Name("n0").Obj(), st.MakeNode().Name("n1").Obj()
	anywhere := groupClaim("anywhere", 1, "n0")
	anywhere.Status.Allocation.NodeSelector = nil
	for _, tc := range []struct {
		name    string
		claims  []*resourceapi.ResourceClaim
		pending int
		allowN0 bool
		allowN1 bool
	}{
		{name: "none", allowN0: true, allowN1: true},
		{name: "not allocated: to allocate, anywhere", claims: []*resourceapi.ResourceClaim{groupClaim("c", 2, "")}, pending: 1, allowN0: true, allowN1: true},
		{name: "allocated on n0: n0 only", claims: []*resourceapi.ResourceClaim{groupClaim("c", 2, "n0")}, allowN0: true},
		{name: "allocated without a node selector (network-attached): anywhere", claims: []*resourceapi.ResourceClaim{anywhere}, allowN0: true, allowN1: true},
		{name: "one on n0, one on n1: nowhere", claims: []*resourceapi.ResourceClaim{groupClaim("c", 1, "n0"), groupClaim("d", 1, "n1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := placeGroupClaims(tc.claims)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.pending) != tc.pending || g.allows(n0) != tc.allowN0 || g.allows(n1) != tc.allowN1 {
				t.Errorf("pending %d, n0 %v, n1 %v; want %d, %v, %v", len(g.pending), g.allows(n0), g.allows(n1), tc.pending, tc.allowN0, tc.allowN1)
			}
		})
	}
}

func TestClaimFreesOrPins(t *testing.T) {
	allocated := func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		c = c.DeepCopy()
		c.Status.Allocation = &resourceapi.AllocationResult{}
		return c
	}
	reserved := func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		c = c.DeepCopy()
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "p"}}
		return c
	}
	own := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "member-gpu"}}
	group := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "pg-gpu",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "pg", UID: "pg"}}}}
	cases := []struct {
		name     string
		old, new *resourceapi.ResourceClaim
		want     bool
	}{
		{name: "allocated at binding: nothing freed", old: own, new: allocated(own), want: false},
		{name: "reserved: nothing freed", old: allocated(own), new: reserved(allocated(own)), want: false},
		{name: "deallocated: devices freed", old: reserved(allocated(own)), new: own, want: true},
		{name: "deleted while allocated: devices freed", old: allocated(own), want: true},
		{name: "deleted unallocated: nothing freed", old: own, want: false},
		{name: "created", new: own, want: false},
		{name: "a PodGroup's claim allocated: pins its users", old: group, new: allocated(group), want: true},
		{name: "a PodGroup's claim reserved: nothing changes", old: allocated(group), new: reserved(allocated(group)), want: false},
		{name: "a PodGroup's claim deallocated", old: allocated(group), new: group, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClaimFreesOrPins(tc.old, tc.new); got != tc.want {
				t.Errorf("ClaimFreesOrPins = %v, want %v", got, tc.want)
			}
		})
	}
}

// The claim orders the DynamicResources plugin of 1.37 mixes up (see ClaimOrder).
func TestClaimOrder(t *testing.T) {
	pg := inTreeGroup([]schedulingv1beta1.PodGroupResourceClaim{fromTemplate("gpus", "group-gpus"), named("fabric", "fabric-claim")},
		map[string]string{"gpus": "pg-gpus-x7k2q"})
	cases := []struct {
		name     string
		pod      *v1.Pod
		pg       *schedulingv1beta1.PodGroup
		extended string
		// want is a part of the message; "" when the pod may be placed.
		want string
	}{
		{name: "own claim first", pod: inGroup("m0", "pg", podTemplateClaim("gpu", "own-gpu"), podTemplateClaim("gpus", "group-gpus")), pg: pg},
		{name: "the PodGroup's claim first", pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus"), podTemplateClaim("gpu", "own-gpu")), pg: pg,
			want: `claim "gpus" before its own claim "gpu"`},
		{name: "a named PodGroup claim first", pod: inGroup("m0", "pg", podNamedClaim("fabric", "fabric-claim"), podNamedClaim("mine", "my-claim")), pg: pg,
			want: `claim "fabric" before its own claim "mine"`},
		{name: "only PodGroup claims", pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus"), podNamedClaim("fabric", "fabric-claim")), pg: pg},
		{name: "only its own claims", pod: inGroup("m0", "pg", podTemplateClaim("a", "t"), podTemplateClaim("b", "t")), pg: pg},
		{name: "own, group, own", pod: inGroup("m0", "pg", podTemplateClaim("a", "t"), podTemplateClaim("gpus", "group-gpus"), podTemplateClaim("b", "t")), pg: pg,
			want: `before its own claim "b"`},
		{name: "a PodGroup claim and a DRA-backed extended resource", pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus")), pg: pg,
			extended: "example.com/gpu", want: "extended resource example.com/gpu"},
		{name: "no PodGroup read (gate off)", pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus"), podTemplateClaim("gpu", "own-gpu"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if tc.pg != nil {
				got = claimOrder(tc.pod, tc.pg, tc.extended)
			}
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("claimOrder = %q, want %q", got, tc.want)
			}
		})
	}
}

// Which members wait for their claims from templates (the plugin's WaitingForClaims): a claim the
// resourceclaim controller has not recorded in the pod's status yet, not the PodGroup's.
func TestClaimsUnmade(t *testing.T) {
	pg := inTreeGroup([]schedulingv1beta1.PodGroupResourceClaim{fromTemplate("gpus", "group-gpus")}, nil)
	made := func(p *v1.Pod, claims ...string) *v1.Pod {
		for _, c := range claims {
			p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: c, ResourceClaimName: ptr.To(p.Name + "-" + c)})
		}
		return p
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		pg   *schedulingv1beta1.PodGroup
		want bool
	}{
		{name: "no claims", pod: inGroup("m0", "")},
		{name: "a named claim (DynamicResources waits for it)", pod: inGroup("m0", "", podNamedClaim("gpu", "c"))},
		{name: "from a template, not made", pod: inGroup("m0", "", podTemplateClaim("gpu", "t")), want: true},
		{name: "from a template, made", pod: made(inGroup("m0", "", podTemplateClaim("gpu", "t")), "gpu")},
		{name: "the controller recorded that none is needed",
			pod: func() *v1.Pod {
				p := inGroup("m0", "", podTemplateClaim("gpu", "t"))
				p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu"}}
				return p
			}()},
		{name: "two, one made", pod: made(inGroup("m0", "", podTemplateClaim("gpu", "t"), podTemplateClaim("nic", "n")), "gpu"), want: true},
		{name: "the PodGroup's claim is made for the PodGroup, not recorded in the pod",
			pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus")), pg: pg},
		{name: "the PodGroup's and an own one not made",
			pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus"), podTemplateClaim("nic", "n")), pg: pg, want: true},
		{name: "PodGroup claims not read: the pod's own",
			pod: inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus")), want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClaimsUnmade(tc.pod, tc.pg); got != tc.want {
				t.Errorf("ClaimsUnmade = %v, want %v", got, tc.want)
			}
		})
	}
	// Through the source: an in-tree PodGroup it does not know yet holds nobody back.
	s := (&Source{}).WithGroupClaims(func(string, string) *schedulingv1beta1.PodGroup { return nil })
	if s.ClaimsUnmade(inGroup("m0", "pg", podTemplateClaim("gpus", "group-gpus"))) {
		t.Error("a member of an unknown in-tree PodGroup is held back; want it not held")
	}
	if !s.ClaimsUnmade(inGroup("m0", "", podTemplateClaim("gpu", "t"))) {
		t.Error("a pod of no PodGroup with an unmade claim is not held back")
	}
}

// TestClaimFreed: a change that may change a check hands on the claim it concerns (the old one, else
// the new) and whether it is allocated now; any other change nothing.
func TestClaimFreed(t *testing.T) {
	own := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "member-gpu"}}
	allocated := own.DeepCopy()
	allocated.Status.Allocation = &resourceapi.AllocationResult{}
	group := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "pg-gpu",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: "pg", UID: "pg"}}}}
	groupAllocated := group.DeepCopy()
	groupAllocated.Status.Allocation = &resourceapi.AllocationResult{}
	for _, tc := range []struct {
		name          string
		old, new      *resourceapi.ResourceClaim
		wantClaim     *resourceapi.ResourceClaim
		wantAllocated bool
		wantOK        bool
	}{
		{"allocated at binding: nothing", own, allocated, nil, false, false},
		{"deallocated: the old claim, not allocated", allocated, own, allocated, false, true},
		{"deleted while allocated: the old claim", allocated, nil, allocated, false, true},
		{"a PodGroup's claim allocated: the old claim, allocated now", group, groupAllocated, group, true, true},
	} {
		claim, alloc, ok := ClaimFreed(tc.old, tc.new)
		if claim != tc.wantClaim || alloc != tc.wantAllocated || ok != tc.wantOK {
			t.Errorf("%s: ClaimFreed = %v, %v, %v; want %v, %v, %v", tc.name, claim != nil, alloc, ok, tc.wantClaim != nil, tc.wantAllocated, tc.wantOK)
		}
	}
}
