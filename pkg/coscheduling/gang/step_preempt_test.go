package gang

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// preemptor is a member of "g" at priority 100 requesting cpu.
func preemptor(name, cpu string) *v1.Pod {
	p := gangtest.Member(name, "g", cpu)
	p.Spec.Priority = ptr.To[int32](100)
	return p
}

// taintedNode is a 4-CPU node with a NoSchedule taint no member tolerates, and pods on it.
func taintedNode(name string, pods ...*v1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).
		Taints([]v1.Taint{{Key: "dedicated", Value: "other", Effect: v1.TaintEffectNoSchedule}}).Obj())
	return ni
}

// TestPreempt is every outcome of a gang's preemption step: a row per way the gang may not preempt,
// waits, would not be helped, or preempts, with the victims and where its members go, and which of
// the step's readers it called (none past the point it decided).
func TestPreempt(t *testing.T) {
	low := func(name, node, cpu string) *v1.Pod { return gangtest.Running(name, "", node, cpu, 10) }
	leaving := low("leaving", "a", "4")
	never := preemptor("m1", "4")
	never.Spec.PreemptionPolicy = ptr.To(v1.PreemptNever)
	badTopology := preemptor("m0", "4")
	badTopology.Annotations = map[string]string{gangfit.AnnotationTopologyRequired: "not a label key/"}
	claim := st.MakePod().Namespace("other").Name("c").UID("c").Priority(100).Req(map[v1.ResourceName]string{v1.ResourceCPU: "4"}).Obj()
	claim.Status.NominatedNodeName = "a"
	guarded := low("guarded", "a", "4")
	guarded.Labels = map[string]string{"app": "db"}
	budget := &policy.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec:   policy.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		Status: policy.PodDisruptionBudgetStatus{DisruptionsAllowed: 0}}

	type calls struct{ split, terminating, claims, pdbs int }
	cases := []struct {
		name        string
		pod         *v1.Pod
		members     []*v1.Pod
		need        int
		nodes       []fwk.NodeInfo
		terminating int
		// releasing counts the claims still allocated to evicted pods on the nominated nodes.
		releasing int
		claimed   []*v1.Pod
		pdbErr    error
		pdbs      []*policy.PodDisruptionBudget
		want      PreemptOut
		// wantViolations counts the victims whose eviction breaks a budget.
		wantViolations int
		wantVictims    []string
		wantAssign     map[string]string
		wantCalls      calls
	}{
		{name: "a member whose preemptionPolicy is Never: the gang may not preempt",
			members: []*v1.Pod{preemptor("m0", "4"), never}, need: 2, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("x", "a", "4"))},
			want: PreemptOut{Result: PreemptNotEligible, Message: "preemption: PodGroup ns/g: member ns/m1 has preemptionPolicy Never"}},
		{name: "no pod of lower priority anywhere: not helpful, before any simulation",
			need: 1, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", gangtest.Running("hi", "", "a", "4", 100))},
			want: PreemptOut{Result: PreemptNotHelpful, DropNominations: true, Message: "preemption: PodGroup ns/g does not fit, and no pod of lower priority runs on any node"}},
		{name: "the earlier preemption's victims still terminate: wait for them",
			need: 1, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("x", "a", "4"))}, terminating: 2,
			want:      PreemptOut{Result: PreemptWaiting, Message: "preemption: PodGroup ns/g waits for 2 pods it preempted to terminate"},
			wantCalls: calls{split: 1, terminating: 1}},
		{name: "the earlier victims are gone but their claims still hold the devices: wait for them, evict no other holder",
			need: 1, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("x", "a", "4"))}, releasing: 1,
			want:      PreemptOut{Result: PreemptWaiting, Message: "preemption: PodGroup ns/g waits for the devices of 1 ResourceClaims of preempted pods to be freed"},
			wantCalls: calls{split: 1, terminating: 1}},
		{name: "malformed topology annotations: the gang may not preempt",
			pod: badTopology, need: 1, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("x", "a", "4"))},
			want:      PreemptOut{Result: PreemptNotEligible, Message: "x"},
			wantCalls: calls{split: 1, terminating: 1}},
		{name: "nothing left to place", need: 0, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("x", "a", "4"))},
			want: PreemptOut{Result: PreemptNotEligible}, wantCalls: calls{split: 1, terminating: 1, claims: 1}},
		{name: "the budgets cannot be read", need: 1, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("x", "a", "4"))}, pdbErr: errors.New("boom"),
			want: PreemptOut{Result: PreemptError}, wantCalls: calls{split: 1, terminating: 1, claims: 1, pdbs: 1}},
		{name: "evicting every lower pod would not make room for both members: not helpful, nothing evicted",
			members: []*v1.Pod{preemptor("m0", "4"), preemptor("m1", "4")}, need: 2, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("x", "a", "4"))},
			want:      PreemptOut{Result: PreemptNotHelpful, DropNominations: true, Message: "preemption: PodGroup ns/g does not fit even if all 1 lower-priority pods and gangs on the nodes its members may use were evicted; nothing was evicted"},
			wantCalls: calls{split: 1, terminating: 1, claims: 1, pdbs: 1}},
		{name: "lower pods run only where the members may not go",
			members: []*v1.Pod{preemptor("m0", "4"), preemptor("m1", "4")}, need: 2, nodes: []fwk.NodeInfo{taintedNode("t", low("x", "t", "4")), gangtest.Node("b", "4")},
			want:      PreemptOut{Result: PreemptNotHelpful, DropNominations: true, Message: "preemption: PodGroup ns/g does not fit, and no pod of lower priority runs on the nodes its members may use"},
			wantCalls: calls{split: 1, terminating: 1, claims: 1, pdbs: 1}},
		{name: "it fits without evicting anything: not helpful, the nominations stay",
			need: 1, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("x", "a", "4")), gangtest.Node("b", "4")},
			want: PreemptOut{Result: PreemptNotHelpful}, wantCalls: calls{split: 1, terminating: 1, claims: 1, pdbs: 1}},
		{name: "a pod leaving for an earlier preemption is no victim, and its room counts free",
			need: 1, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", leaving)},
			want: PreemptOut{Result: PreemptNotHelpful}, wantCalls: calls{split: 1, terminating: 1, claims: 1, pdbs: 1}},
		{name: "a single lower pod is evicted and the member goes where it ran",
			need: 1, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("x", "a", "4"))},
			want: PreemptOut{Result: PreemptVictims}, wantVictims: []string{"x"}, wantAssign: map[string]string{"m0": "a"},
			wantCalls: calls{split: 1, terminating: 1, claims: 1, pdbs: 1}},
		{name: "a lower gang is evicted whole, though one of its pods would do",
			need: 1, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", gangtest.Running("v0", "v", "a", "4", 10)), gangtest.NodeWith("b", "4", gangtest.Running("v1", "v", "b", "2", 10))},
			want: PreemptOut{Result: PreemptVictims}, wantVictims: []string{"v0", "v1"}, wantAssign: map[string]string{"m0": "a"},
			wantCalls: calls{split: 1, terminating: 1, claims: 1, pdbs: 1}},
		{name: "a victim whose eviction breaks its budget is still evicted when nothing else makes room, and counted",
			need: 1, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", guarded)}, pdbs: []*policy.PodDisruptionBudget{budget},
			want: PreemptOut{Result: PreemptVictims}, wantVictims: []string{"guarded"}, wantAssign: map[string]string{"m0": "a"}, wantViolations: 1,
			wantCalls: calls{split: 1, terminating: 1, claims: 1, pdbs: 1}},
		{name: "room nominated to a preemptor of this priority is not free: a victim elsewhere",
			need: 1, nodes: []fwk.NodeInfo{gangtest.Node("a", "4"), gangtest.NodeWith("b", "4", low("x", "b", "4"))}, claimed: []*v1.Pod{claim},
			want: PreemptOut{Result: PreemptVictims}, wantVictims: []string{"x"}, wantAssign: map[string]string{"m0": "b"},
			wantCalls: calls{split: 1, terminating: 1, claims: 1, pdbs: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod
			if pod == nil {
				pod = preemptor("m0", "4")
			}
			members := tc.members
			if members == nil {
				members = []*v1.Pod{pod}
			}
			var got calls
			in := PreemptIn{Pod: pod, PodGroup: gangtest.PodGroup("ns", "g", int32(len(members)), t0), Members: members, Nodes: tc.nodes,
				Split: func() ([]*v1.Pod, int, []string) { got.split++; return members, tc.need, []string{"a"} },
				Fit:   &gangfit.Shared{}, Logger: klog.Background(),
				Terminating: func(nodes []string, prio int32) int {
					got.terminating++
					if prio != 100 || len(nodes) != 1 || nodes[0] != "a" {
						t.Errorf("Terminating(%v, %d), want the gang's nominated nodes at its priority", nodes, prio)
					}
					return tc.terminating
				},
				Releasing: func(nodes []string) int {
					if len(nodes) != 1 || nodes[0] != "a" {
						t.Errorf("Releasing(%v), want the gang's nominated nodes", nodes)
					}
					return tc.releasing
				},
				Claims:  func() []*v1.Pod { got.claims++; return tc.claimed },
				PDBs:    func() ([]*policy.PodDisruptionBudget, error) { got.pdbs++; return tc.pdbs, tc.pdbErr },
				Leaving: func(p *v1.Pod) bool { return p == leaving },
			}
			out := Preempt(in)
			if tc.want.Result == PreemptNotEligible && tc.want.Message == "x" {
				// The policy's own words.
				if !strings.Contains(out.Message, "not a label key/") {
					t.Errorf("message %q, want the malformed annotation named", out.Message)
				}
				tc.want.Message = out.Message
			}
			if (out.Err != nil) != (tc.pdbErr != nil) || (tc.pdbErr != nil && !errors.Is(out.Err, tc.pdbErr)) {
				t.Errorf("error %v, want one wrapping %v", out.Err, tc.pdbErr)
			}
			if diff := cmp.Diff(tc.want, PreemptOut{Result: out.Result, Message: out.Message, DropNominations: out.DropNominations}); diff != "" {
				t.Errorf("Preempt (-want,+got):\n%s", diff)
			}
			var victims []string
			for _, v := range out.Plan.Victims {
				victims = append(victims, v.Name)
			}
			assign := map[string]string{}
			for _, a := range out.Plan.Assignment {
				assign[a.Pod.Name] = a.Node
			}
			if tc.wantAssign == nil {
				tc.wantAssign = map[string]string{}
			}
			if diff := cmp.Diff(tc.wantVictims, victims); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAssign, assign); out.Result == PreemptVictims && diff != "" {
				t.Errorf("assignment (-want,+got):\n%s", diff)
			}
			if out.Plan.Violations != tc.wantViolations {
				t.Errorf("budget violations %d, want %d", out.Plan.Violations, tc.wantViolations)
			}
			if out.Result == PreemptVictims && out.Need != tc.need {
				t.Errorf("need %d, want %d (for the Preempting message)", out.Need, tc.need)
			}
			if got != tc.wantCalls {
				t.Errorf("readers called %+v, want %+v", got, tc.wantCalls)
			}
		})
	}
}

// TestSplitForPreemption: the members to place are those neither reserved here nor bound; the quorum
// needs minMember less those counted; the nodes named are the gang's earlier preemption's and its
// members' nominations.
func TestSplitForPreemption(t *testing.T) {
	g := reservedOn("m0", "a")
	g.NominatedNodes = []string{"b"}
	m1, m2, m3 := gangtest.Member("m1", "g", "1"), bound("m2", "c", "1"), gangtest.Member("m3", "g", "1")
	m3.Status.NominatedNodeName = "d"
	candidates, need, nominated := g.SplitForPreemption([]*v1.Pod{gangtest.Member("m0", "g", "1"), m1, m2, m3}, 4)
	var names []string
	for _, c := range candidates {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"m1", "m3"}, names); diff != "" {
		t.Errorf("candidates (-want,+got):\n%s", diff)
	}
	if need != 2 {
		t.Errorf("need %d, want 2 (minMember 4 less m0 reserved and m2 bound)", need)
	}
	if diff := cmp.Diff([]string{"b", "d"}, nominated); diff != "" {
		t.Errorf("nominated (-want,+got):\n%s", diff)
	}
	if len(g.NominatedNodes) != 1 {
		t.Errorf("the gang's own nominations changed: %v", g.NominatedNodes)
	}
}

func TestPreemptingMessage(t *testing.T) {
	plan := gangfit.Plan{Victims: make([]*v1.Pod, 3), Gangs: []string{"ns/a", "ns/b"}, Singles: 1}
	want := "preempting 3 pods of lower priority than 100 (2 gangs (ns/a, ns/b), 1 single pods) so that 2 members fit; members nominated to n0, n1"
	if got := PreemptingMessage(plan, 100, 2, []string{"n0", "n1"}); got != want {
		t.Errorf("PreemptingMessage = %q, want %q", got, want)
	}
	want = "preempting 1 pods of lower priority than 5 (0 gangs, 1 single pods) so that 1 members fit; members nominated to n0"
	if got := PreemptingMessage(gangfit.Plan{Victims: make([]*v1.Pod, 1), Singles: 1}, 5, 1, []string{"n0"}); got != want {
		t.Errorf("PreemptingMessage = %q, want %q", got, want)
	}
}

// TestPreemptionPlanMembers: the node the plan gives a member (none for one it does not place), the
// nominations a preemption keeps when it ends the gang's reservation, and that end's message.
func TestPreemptionPlanMembers(t *testing.T) {
	m0, m1, m2 := preemptor("m0", "1"), preemptor("m1", "1"), preemptor("m2", "1")
	assignment := []gangfit.Nomination{{Pod: m0, Node: "a"}, {Pod: m1, Node: "b"}}
	for _, tc := range []struct {
		pod      *v1.Pod
		wantNode string
		wantOK   bool
	}{{m0, "a", true}, {m1, "b", true}, {m2, "", false}} {
		if node, ok := NodeFor(assignment, tc.pod.UID); node != tc.wantNode || ok != tc.wantOK {
			t.Errorf("NodeFor(%s) = %q, %v; want %q, %v", tc.pod.Name, node, ok, tc.wantNode, tc.wantOK)
		}
	}
	if diff := cmp.Diff(map[types.UID]bool{m0.UID: true, m1.UID: true}, Kept(assignment)); diff != "" {
		t.Errorf("Kept (-want,+got):\n%s", diff)
	}
	if got, want := PreemptsInsteadMessage(3, []string{"a", "b"}), "the gang preempts 3 lower-priority pods instead; its members are nominated to a, b"; got != want {
		t.Errorf("PreemptsInsteadMessage = %q, want %q", got, want)
	}
}

// TestPreemptForJob is a job of several roles preempting as one (PreemptIn.Job): its groups' missing
// members placed at once, in its domain when it has one, waiting on the nodes any of its groups'
// earlier preemptions named, never evicting a pod of its own.
func TestPreemptForJob(t *testing.T) {
	low := func(name, node, cpu string) *v1.Pod { return gangtest.Running(name, "", node, cpu, 10) }
	member := func(name, group string) *v1.Pod {
		p := gangtest.Member(name, group, "4")
		p.Spec.Priority = ptr.To[int32](100)
		return p
	}
	prefill, decode := member("p0", "prefill"), member("d0", "decode")
	twoRoles := []gangfit.Group{{Key: "ns/prefill", Candidates: []*v1.Pod{prefill}, Need: 1}, {Key: "ns/decode", Candidates: []*v1.Pod{decode}, Need: 1}}
	// Two racks of two nodes: one free and one full of a lower pod in each.
	racked := func() []fwk.NodeInfo {
		return []fwk.NodeInfo{gangtest.RackedNode("r1-0", "", "", "r1"), gangtest.RackedNode("r1-1", "", "", "r1", low("x", "r1-1", "4")),
			gangtest.RackedNode("r2-0", "", "", "r2"), gangtest.RackedNode("r2-1", "", "", "r2", low("y", "r2-1", "4"))}
	}
	// A job in one block whose replica (the composite of both roles) requires one rack of it.
	replica := func(value string, leaves ...string) *TreeDomain {
		return &TreeDomain{Composite: "ns/replica-0", Key: gangtest.RackKey, Value: value, Leaves: leaves}
	}
	inBlock := func(value string, inner ...*TreeDomain) *TreeDomain {
		return &TreeDomain{Composite: "ns/job", Key: gangtest.BlockKey, Value: value, Inner: inner,
			Leaves: []string{"ns/prefill", "ns/decode", "ns/prefill-1", "ns/decode-1"}}
	}
	// Block b1, racks r1 and r2 of two nodes each: one free and one full of a lower pod in each.
	blockRacks := func() []fwk.NodeInfo {
		return []fwk.NodeInfo{gangtest.RackedNode("r1-0", "", "b1", "r1"), gangtest.RackedNode("r1-1", "", "b1", "r1", low("x", "r1-1", "4")),
			gangtest.RackedNode("r2-0", "", "b1", "r2"), gangtest.RackedNode("r2-1", "", "b1", "r2", low("y", "r2-1", "4"))}
	}
	thirdRole := append(slices.Clone(twoRoles), gangfit.Group{Key: "ns/prefill-1", Candidates: []*v1.Pod{member("q0", "prefill-1")}, Need: 1})
	// Two replicas, each of both roles and requiring a rack of its own, in one block: in parts.
	secondReplica := []gangfit.Group{{Key: "ns/prefill-1", Candidates: []*v1.Pod{member("q0", "prefill-1")}, Need: 1}, {Key: "ns/decode-1", Candidates: []*v1.Pod{member("e0", "decode-1")}, Need: 1}}
	replicaN := func(n string) *TreeDomain { return &TreeDomain{Composite: "ns/replica-" + n, Key: gangtest.RackKey} }
	inParts := func(block string) JobPreemption {
		return JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: append(slices.Clone(twoRoles), secondReplica...),
			Domain: inBlock(block, replicaN("0")), Outer: &TreeDomain{Composite: "ns/job", Key: gangtest.BlockKey, Value: block},
			Parts: []JobPart{{Chain: []*TreeDomain{replicaN("0")}, Groups: twoRoles}, {Chain: []*TreeDomain{replicaN("1")}, Groups: secondReplica}}}
	}
	high := func(name, node string) *v1.Pod { return gangtest.Running(name, "", node, "4", 200) }
	cases := []struct {
		name        string
		job         JobPreemption
		nodes       []fwk.NodeInfo
		terminating int
		want        PreemptOut
		wantVictims []string
		wantAssign  map[string]string
		// wantWaitedOn are the nodes Terminating was asked about.
		wantWaitedOn []string
		// wantNeed: the members the plan places (2 when 0).
		wantNeed int
	}{
		{name: "each role fits the free node alone, not both: one lower pod is evicted, both roles nominated",
			job:   JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: twoRoles},
			nodes: []fwk.NodeInfo{gangtest.Node("a", "4"), gangtest.NodeWith("b", "4", low("x", "b", "4")), gangtest.NodeWith("c", "4", low("y", "c", "2"))},
			want:  PreemptOut{Result: PreemptVictims}, wantVictims: []string{"y"}, wantAssign: map[string]string{"p0": "a", "d0": "c"}},
		{name: "the job's domain is pinned to r1 (its bound members are there): the victim is the lower pod there, not r2's, which unpinned goes",
			job:   JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: twoRoles, Domain: &TreeDomain{Composite: "ns/job", Key: gangtest.RackKey, Value: "r1"}},
			nodes: racked(),
			want:  PreemptOut{Result: PreemptVictims}, wantVictims: []string{"x"}, wantAssign: map[string]string{"p0": "r1-0", "d0": "r1-1"}},
		{name: "unpinned, over the same nodes",
			job:   JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: twoRoles, Domain: &TreeDomain{Composite: "ns/job", Key: gangtest.RackKey}},
			nodes: racked(),
			want:  PreemptOut{Result: PreemptVictims}, wantVictims: []string{"y"}, wantAssign: map[string]string{"p0": "r2-0", "d0": "r2-1"}},
		{name: "the job's domain not chosen yet: the domain of the cheapest victims is chosen, and only its lower pod goes",
			job: JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: twoRoles, Domain: &TreeDomain{Composite: "ns/job", Key: gangtest.RackKey}},
			nodes: []fwk.NodeInfo{gangtest.RackedNode("r1-0", "", "", "r1"), gangtest.RackedNode("r1-1", "", "", "r1", gangtest.Running("x", "", "r1-1", "4", 50)),
				gangtest.RackedNode("r2-0", "", "", "r2"), gangtest.RackedNode("r2-1", "", "", "r2", low("y", "r2-1", "4"))},
			want: PreemptOut{Result: PreemptVictims}, wantVictims: []string{"y"}, wantAssign: map[string]string{"p0": "r2-0", "d0": "r2-1"}},
		{name: "both roles under a replica that requires one rack: the search places them in one (a victim in it), not on the free nodes of two racks (which fit the block without evicting)",
			job:   JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: twoRoles, Domain: inBlock("", replica("", "ns/prefill", "ns/decode"))},
			nodes: blockRacks(),
			want:  PreemptOut{Result: PreemptVictims}, wantVictims: []string{"y"}, wantAssign: map[string]string{"p0": "r2-0", "d0": "r2-1"}},
		{name: "the replica's rack is pinned to r1 (its placed members are there): the victim is r1's lower pod, not r2's, which unpinned goes",
			job:   JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: twoRoles, Domain: inBlock("", replica("r1", "ns/prefill", "ns/decode"))},
			nodes: blockRacks(),
			want:  PreemptOut{Result: PreemptVictims}, wantVictims: []string{"x"}, wantAssign: map[string]string{"p0": "r1-0", "d0": "r1-1"}},
		{name: "the job's block is pinned to b1 and rack r1 spans b1 and b2: the replica's rack is one within b1 (r2, two victims, one of priority 50), not r1 (one victim, a member in b2), nor the two cheapest of b1 (x and y, in two racks)",
			job: JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: twoRoles, Domain: inBlock("b1", replica("", "ns/prefill", "ns/decode"))},
			nodes: []fwk.NodeInfo{gangtest.RackedNode("r1-0", "", "b2", "r1"), gangtest.RackedNode("r1-1", "", "b1", "r1", low("x", "r1-1", "4")),
				gangtest.RackedNode("r2-0", "", "b1", "r2", low("y", "r2-0", "4")), gangtest.RackedNode("r2-1", "", "b1", "r2", gangtest.Running("z", "", "r2-1", "4", 50))},
			want: PreemptOut{Result: PreemptVictims}, wantVictims: []string{"z", "y"}, wantAssign: map[string]string{"p0": "r2-0", "d0": "r2-1"}},
		{name: "a role of another replica to place too: one search would not keep each replica in a rack of its own, so the job does not preempt as one",
			job:   JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: thirdRole, Domain: inBlock("", replica("", "ns/prefill", "ns/decode"))},
			nodes: blockRacks(),
			want: PreemptOut{Result: PreemptNotEligible,
				Message: "preemption: PodGroup ns/prefill with the groups its job ns/job needs: its groups to place are not all under one composite with a required topology of its own (ns/replica-0, under ns/job, requires one " + gangtest.RackKey + " domain for ns/prefill, ns/decode; ns/prefill-1 are outside it): one search would not keep each composite's groups in one domain, so the job does not preempt as one; nothing was evicted"}},
		{name: "the groups to place are under none of the member's replicas (its own group complete): they may be under another's, so the job does not preempt as one",
			job: JobPreemption{Job: "ns/job", Unit: "ns/job", Domain: inBlock("", replica("", "ns/prefill", "ns/decode")),
				Groups: []gangfit.Group{{Key: "ns/prefill", Need: 0}, {Key: "ns/prefill-1", Candidates: []*v1.Pod{member("q0", "prefill-1")}, Need: 1}, {Key: "ns/decode-1", Candidates: []*v1.Pod{member("e0", "decode-1")}, Need: 1}}},
			nodes: blockRacks(),
			want: PreemptOut{Result: PreemptNotEligible,
				Message: "preemption: PodGroup ns/prefill with the groups its job ns/job needs: its groups to place (ns/prefill-1, ns/decode-1) are under none of its composites with a required topology of their own (ns/replica-0), and may be under others: one search would not keep each composite's groups in one domain, so the job does not preempt as one; nothing was evicted"}},
		{name: "two replicas, each requiring a rack of its own: the job preempts in parts, one victim in each rack, each replica in one",
			job: inParts(""), nodes: blockRacks(), wantNeed: 4,
			want: PreemptOut{Result: PreemptVictims}, wantVictims: []string{"y", "x"}, wantAssign: map[string]string{"p0": "r2-0", "d0": "r2-1", "q0": "r1-0", "e0": "r1-1"}},
		{name: "two replicas where one rack can be freed: nothing is evicted for one replica alone",
			job: inParts(""), nodes: []fwk.NodeInfo{gangtest.RackedNode("r1-0", "", "b1", "r1"), gangtest.RackedNode("r1-1", "", "b1", "r1", low("x", "r1-1", "4")),
				gangtest.RackedNode("r2-0", "", "b1", "r2"), gangtest.RackedNode("r2-1", "", "b1", "r2", high("h", "r2-1"))},
			want: PreemptOut{Result: PreemptNotHelpful, DropNominations: true,
				Message: "preemption: PodGroup ns/prefill with the groups its job ns/job needs does not fit, each of its 2 parts in one domain of its own, even if the lower-priority pods and gangs on the nodes its members may use were evicted; nothing was evicted"}},
		{name: "two replicas, two blocks: the block where both racks can be freed is chosen",
			job: inParts(""), nodes: []fwk.NodeInfo{gangtest.RackedNode("r1-0", "", "b1", "r1"), gangtest.RackedNode("r1-1", "", "b1", "r1", low("x", "r1-1", "4")),
				gangtest.RackedNode("r2-0", "", "b1", "r2"), gangtest.RackedNode("r2-1", "", "b1", "r2", high("h", "r2-1")),
				gangtest.RackedNode("r3-0", "", "b2", "r3"), gangtest.RackedNode("r3-1", "", "b2", "r3", low("u", "r3-1", "4")),
				gangtest.RackedNode("r4-0", "", "b2", "r4"), gangtest.RackedNode("r4-1", "", "b2", "r4", low("v", "r4-1", "4"))}, wantNeed: 4,
			want: PreemptOut{Result: PreemptVictims}, wantVictims: []string{"v", "u"}, wantAssign: map[string]string{"p0": "r4-0", "d0": "r4-1", "q0": "r3-0", "e0": "r3-1"}},
		{name: "two replicas, the job's block pinned to b1 where one rack can be freed: b2 is not used, nothing is evicted",
			job: inParts("b1"), nodes: []fwk.NodeInfo{gangtest.RackedNode("r1-0", "", "b1", "r1"), gangtest.RackedNode("r1-1", "", "b1", "r1", low("x", "r1-1", "4")),
				gangtest.RackedNode("r2-0", "", "b1", "r2"), gangtest.RackedNode("r2-1", "", "b1", "r2", high("h", "r2-1")),
				gangtest.RackedNode("r3-0", "", "b2", "r3"), gangtest.RackedNode("r3-1", "", "b2", "r3", low("u", "r3-1", "4")),
				gangtest.RackedNode("r4-0", "", "b2", "r4"), gangtest.RackedNode("r4-1", "", "b2", "r4", low("v", "r4-1", "4"))},
			want: PreemptOut{Result: PreemptNotHelpful, DropNominations: true,
				Message: "preemption: PodGroup ns/prefill with the groups its job ns/job needs does not fit, each of its 2 parts in one domain of its own, even if the lower-priority pods and gangs on the nodes its members may use were evicted; nothing was evicted"}},
		{name: "a pod of the job's own unit is never a victim, though it runs below the job's priority",
			job:   JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: twoRoles},
			nodes: []fwk.NodeInfo{gangtest.Node("a", "4"), gangtest.NodeWith("b", "4", gangtest.Running("own", "job", "b", "4", 10))},
			want: PreemptOut{Result: PreemptNotHelpful, DropNominations: true,
				Message: "preemption: PodGroup ns/prefill with the groups its job ns/job needs does not fit, and no pod of lower priority runs on the nodes its members may use"}},
		{name: "another group's earlier preemption still terminates: the job waits on its nodes",
			job:   JobPreemption{Job: "ns/job", Unit: "ns/job", Groups: twoRoles, Nominated: []string{"b"}},
			nodes: []fwk.NodeInfo{gangtest.Node("a", "4"), gangtest.NodeWith("b", "4", low("x", "b", "4"))}, terminating: 1,
			want:         PreemptOut{Result: PreemptWaiting, Message: "preemption: PodGroup ns/prefill with the groups its job ns/job needs waits for 1 pods it preempted to terminate"},
			wantWaitedOn: []string{"b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var waitedOn []string
			job := tc.job
			in := PreemptIn{Pod: prefill, PodGroup: gangtest.PodGroup("ns", "prefill", 1, t0), Members: []*v1.Pod{prefill, decode}, Nodes: tc.nodes, Job: &job,
				Split: func() ([]*v1.Pod, int, []string) {
					t.Fatal("a job's preemption split its own group")
					return nil, 0, nil
				},
				Fit: &gangfit.Shared{}, Logger: klog.Background(),
				Terminating: func(nodes []string, prio int32) int { waitedOn = nodes; return tc.terminating },
				Claims:      func() []*v1.Pod { return nil },
				PDBs:        func() ([]*policy.PodDisruptionBudget, error) { return nil, nil },
			}
			out := Preempt(in)
			if diff := cmp.Diff(tc.want, PreemptOut{Result: out.Result, Message: out.Message, DropNominations: out.DropNominations}); diff != "" {
				t.Errorf("Preempt (-want,+got):\n%s", diff)
			}
			var victims []string
			for _, v := range out.Plan.Victims {
				victims = append(victims, v.Name)
			}
			if diff := cmp.Diff(tc.wantVictims, victims); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
			if out.Result == PreemptVictims {
				assign := map[string]string{}
				for _, a := range out.Plan.Assignment {
					assign[a.Pod.Name] = a.Node
				}
				if diff := cmp.Diff(tc.wantAssign, assign); diff != "" {
					t.Errorf("assignment (-want,+got):\n%s", diff)
				}
				if want := max(tc.wantNeed, 2); out.Need != want {
					t.Errorf("need %d, want %d: every role's members", out.Need, want)
				}
			}
			if diff := cmp.Diff(tc.wantWaitedOn, waitedOn); tc.wantWaitedOn != nil && diff != "" {
				t.Errorf("waited on (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestJobParts: a job's groups to place under several composites with a rack of their own are
// split into parts, one per composite (the groups under none last), within the job's domain; not
// when one composite holds them all. A composite above two parts, not pinned yet, is on both chains
// (see TestPartsPinTheirSharedDomain).
func TestJobParts(t *testing.T) {
	composite := func(name, parent, domain string) tree.Node {
		return tree.Node{Namespace: "ns", Name: name, Composite: true, Gang: true, Min: 2, Parent: parent, Domain: domain}
	}
	leaf := func(name, parent string) tree.Node {
		return tree.Node{Namespace: "ns", Name: name, Gang: true, Min: 1, Parent: parent}
	}
	toPlace := func(keys ...string) []gangfit.Group {
		var out []gangfit.Group
		for _, k := range keys {
			out = append(out, gangfit.Group{Key: "ns/" + k, Candidates: role(k, 1, "1"), Need: 1})
		}
		return out
	}
	replicas := []tree.Node{composite("rep0", "set", gangtest.RackKey), leaf("l0", "rep0"), leaf("w0", "rep0"),
		composite("rep1", "set", gangtest.RackKey), leaf("l1", "rep1"), leaf("w1", "rep1")}
	set := []tree.Node{composite("set", "", ""), leaf("r0", "set"), leaf("r1", "set"), leaf("r2", "set")}
	racks := map[string]string{"ns/r0": gangtest.RackKey, "ns/r1": gangtest.RackKey, "ns/r2": gangtest.RackKey}
	cases := []struct {
		name   string
		nodes  []tree.Node
		groups []gangfit.Group
		own    map[string]string
		// single: one composite's groups make a part (a reservation's); unsafe: parts could split a
		// domain.
		single, unsafe bool
		// want: each part's chain of composites and its groups; outer the job's domain's composite.
		want  []string
		outer string
	}{
		{name: "replicas each requiring a rack of their own (K of N): a part each", nodes: set, own: racks,
			groups: append(toPlace("r0", "r1"), gangfit.Group{Key: "ns/r2"}), want: []string{"ns/r0: ns/r0", "ns/r1: ns/r1"}},
		{name: "one replica to place, requiring a rack of its own: one part, in its rack", nodes: set, own: racks,
			groups: append(toPlace("r1"), gangfit.Group{Key: "ns/r0"}), want: []string{"ns/r1: ns/r1"}},
		{name: "replicas whose policy could not be read: one search", nodes: set, own: map[string]string{"ns/r0": "", "ns/r1": ""},
			groups: toPlace("r0", "r1")},
		{name: "two replicas in a block, each in a rack", nodes: append([]tree.Node{composite("set", "", gangtest.BlockKey)}, replicas...),
			groups: toPlace("l0", "w0", "l1", "w1"), want: []string{"ns/rep0: ns/l0 ns/w0", "ns/rep1: ns/l1 ns/w1"}, outer: "ns/set"},
		{name: "two replicas, the set with no domain", nodes: append([]tree.Node{composite("set", "", "")}, replicas...),
			groups: toPlace("l0", "w0", "l1", "w1"), want: []string{"ns/rep0: ns/l0 ns/w0", "ns/rep1: ns/l1 ns/w1"}},
		{name: "one replica to place: one search", nodes: append([]tree.Node{composite("set", "", gangtest.BlockKey)}, replicas...),
			groups: append(toPlace("l0", "w0"), gangfit.Group{Key: "ns/l1"}, gangfit.Group{Key: "ns/w1"})},
		{name: "one replica to place, for a reservation: a part in its rack", nodes: append([]tree.Node{composite("set", "", gangtest.BlockKey)}, replicas...),
			groups: append(toPlace("l0", "w0"), gangfit.Group{Key: "ns/l1"}, gangfit.Group{Key: "ns/w1"}), single: true,
			want: []string{"ns/rep0: ns/l0 ns/w0"}, outer: "ns/set"},
		{name: "no nested domain, for a reservation: one search", nodes: []tree.Node{composite("set", "", gangtest.BlockKey), leaf("a", "set"), leaf("b", "set")},
			groups: toPlace("a", "b"), single: true},
		{name: "a router under the set beside a replica: the replica, then the router", nodes: append([]tree.Node{composite("set", "", gangtest.BlockKey), leaf("router", "set")}, replicas...),
			groups: toPlace("router", "l0", "w0"), want: []string{"ns/rep0: ns/l0 ns/w0", ": ns/router"}, outer: "ns/set"},
		{name: "two replicas under a pair in one block not placed yet: a part each, the pair on both chains (its blocks tried in turn)", nodes: []tree.Node{composite("set", "", gangtest.ZoneKey), composite("pair", "set", gangtest.BlockKey),
			composite("rep0", "pair", gangtest.RackKey), leaf("l0", "rep0"), composite("rep1", "pair", gangtest.RackKey), leaf("l1", "rep1")},
			groups: toPlace("l0", "l1"), want: []string{"ns/pair,ns/rep0: ns/l0", "ns/pair,ns/rep1: ns/l1"}, outer: "ns/set"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := tree.NewIndex()
			for _, n := range tc.nodes {
				x.Set(n)
			}
			asker := strings.TrimPrefix(tc.groups[0].Key, "ns/")
			root, _ := x.Resolve("ns", asker)
			g := New("ns", asker, "uid")
			in := treeIn(g, nil, 0, gangtest.RackedCluster(), map[string]*Gang{}, root, map[string][]*v1.Pod{})
			in.OwnDomain = tc.own
			outer, parts, ok := jobParts(in, root, root.JobOf(g.Key()), g.Key(), tc.groups, tc.single)
			if ok == tc.unsafe {
				t.Errorf("jobParts ok %v, want %v", ok, !tc.unsafe)
			}
			var got []string
			for _, p := range parts {
				var chain, groups []string
				for _, d := range p.Chain {
					chain = append(chain, d.Composite)
				}
				for _, gr := range p.Groups {
					groups = append(groups, gr.Key)
				}
				got = append(got, strings.Join(chain, ",")+": "+strings.Join(groups, " "))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parts (-want,+got):\n%s", diff)
			}
			if o := ""; parts != nil && (outer != nil || tc.outer != "") {
				if outer != nil {
					o = outer.Composite
				}
				if o != tc.outer {
					t.Errorf("outer %q, want %q", o, tc.outer)
				}
			}
		})
	}
}
