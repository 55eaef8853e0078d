package gang

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// TestReserveRoomForJob: a job of several roles reserves as one. Its holder's gang holds one
// reservation for the missing members of all its groups, in the job's domain, whichever group's
// member asks; the other groups' keys are recorded, so that their members are not kept off the room
// and their nominations are cleared at its end.
func TestReserveRoomForJob(t *testing.T) {
	args := resv.Args{After: time.Minute, Timeout: 10 * time.Minute, MaxGangs: 1, Recheck: 10 * time.Second, StallAfter: 30 * time.Second}
	member := func(name, group, cpu string) *v1.Pod {
		p := gangtest.Member(name, group, cpu)
		p.Spec.Priority = ptr.To[int32](100)
		return p
	}
	low := func(node string) *v1.Pod { return gangtest.Running("low-"+node, "", node, "4", 10) }
	high := func(node string) *v1.Pod { return gangtest.Running("high-"+node, "", node, "4", 200) }
	// Block b1 has room for 2 members of 4 CPU once the low pods leave, block b2 for 3.
	nodes := []fwk.NodeInfo{
		gangtest.RackedNode("b1-0", "z1", "b1", "r1", low("b1-0")), gangtest.RackedNode("b1-1", "z1", "b1", "r1", low("b1-1")),
		gangtest.RackedNode("b2-0", "z1", "b2", "r3", low("b2-0")), gangtest.RackedNode("b2-1", "z1", "b2", "r3", low("b2-1")),
		gangtest.RackedNode("b2-2", "z1", "b2", "r3", low("b2-2")), gangtest.RackedNode("b2-3", "z1", "b2", "r3", high("b2-3")),
	}
	a0 := member("a-0", "a", "4")
	b0, b1 := member("b-0", "b", "4"), member("b-1", "b", "4")
	job := func(domain *TreeDomain) *JobPreemption {
		// As the check gives them: the asking member's group first (b's).
		return &JobPreemption{Job: "ns/j", Unit: "ns/j", Holder: "ns/a", Keys: []string{"ns/a", "ns/b"}, Domain: domain,
			Groups:  []gangfit.Group{{Key: "ns/b", Candidates: []*v1.Pod{b1, b0}, Need: 2}, {Key: "ns/a", Candidates: []*v1.Pod{a0}, Need: 1}},
			Members: []*v1.Pod{a0, b0, b1}}
	}
	rackOf := func(key string) *TreeDomain { return &TreeDomain{Composite: key, Key: gangtest.RackKey} }
	cases := []struct {
		name   string
		domain *TreeDomain
		// outer and parts, when parts are set: the room is planned in parts (see JobPart).
		outer     *TreeDomain
		parts     []JobPart
		wantNodes []string
		wantOK    bool
		wantMsg   string
	}{
		{name: "a requires a rack of its own, b the job's block: in parts, in the block where both fit",
			outer: &TreeDomain{Composite: "ns/j", Key: gangtest.BlockKey},
			parts: []JobPart{{Chain: []*TreeDomain{rackOf("ns/a")}, Groups: []gangfit.Group{{Key: "ns/a", Candidates: []*v1.Pod{a0}, Need: 1}}},
				{Groups: []gangfit.Group{{Key: "ns/b", Candidates: []*v1.Pod{b1, b0}, Need: 2}}}},
			wantOK: true, wantNodes: []string{"b2-0", "b2-1", "b2-2"}, wantMsg: "each of its 2 parts in one domain of its own, in " + gangtest.BlockKey + "=b2"},
		{name: "each requires a rack of its own, anywhere: a rack each",
			parts: []JobPart{{Chain: []*TreeDomain{rackOf("ns/a")}, Groups: []gangfit.Group{{Key: "ns/a", Candidates: []*v1.Pod{a0}, Need: 1}}},
				{Chain: []*TreeDomain{rackOf("ns/b")}, Groups: []gangfit.Group{{Key: "ns/b", Candidates: []*v1.Pod{b1, b0}, Need: 2}}}},
			wantOK: true, wantNodes: []string{"b1-0", "b2-0", "b2-1"}, wantMsg: "each of its 2 parts in one domain of its own"},
		{name: "each requires a rack of its own, in the block pinned to b1: one rack is too few, nothing held",
			outer: &TreeDomain{Composite: "ns/j", Key: gangtest.BlockKey, Value: "b1", Pinned: map[string]string{gangtest.BlockKey: "b1"}},
			parts: []JobPart{{Chain: []*TreeDomain{rackOf("ns/a")}, Groups: []gangfit.Group{{Key: "ns/a", Candidates: []*v1.Pod{a0}, Need: 1}}},
				{Chain: []*TreeDomain{rackOf("ns/b")}, Groups: []gangfit.Group{{Key: "ns/b", Candidates: []*v1.Pod{b1, b0}, Need: 2}}}}},
		{name: "no domain: the three members anywhere", wantOK: true, wantNodes: []string{"b1-0", "b1-1", "b2-0"}},
		{name: "the job's required block: the one that holds all three", domain: &TreeDomain{Composite: "ns/j", Key: gangtest.BlockKey},
			wantOK: true, wantNodes: []string{"b2-0", "b2-1", "b2-2"}},
		{name: "pinned to the block too small: nothing held", domain: &TreeDomain{Composite: "ns/j", Key: gangtest.BlockKey, Value: "b1",
			Pinned: map[string]string{gangtest.BlockKey: "b1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			holder := New("ns", "a", "uid-a")
			holder.Reserve.State = resv.State{Phase: resv.Waiting, WaitingSince: t0.Add(-2 * time.Minute), LastTried: t0.Add(-time.Second), Prio: 100}
			var against []string
			j := job(tc.domain)
			j.Outer, j.Parts = tc.outer, tc.parts
			in := ReserveIn{Args: args, Now: t0, Pod: b0, PodGroup: gangtest.PodGroup("ns", "a", 1, t0), Logger: klog.Background(), Job: j,
				Members: func() []*v1.Pod { return job(nil).Members },
				Queue:   func(int32) (int, bool) { return 0, false },
				Nodes:   func() ([]fwk.NodeInfo, error) { return nodes, nil },
				Claims:  func(int32) []*v1.Pod { against = append(against, "read"); return nil },
			}
			out := holder.ReserveRoom(in)
			if out.Room == nil {
				t.Fatalf("no room to plan: steps %+v", out.Steps)
			}
			if out.Room.Need != 3 || len(out.Room.Candidates) != 3 {
				t.Fatalf("room for %d of %d candidates, want 3 of the job's 3", out.Room.Need, len(out.Room.Candidates))
			}
			holder.Planned(in, PlanRoom(in, *out.Room), &out)
			if out.Plan.OK != tc.wantOK {
				t.Fatalf("plan OK %v, want %v: %s", out.Plan.OK, tc.wantOK, out.Plan.Message)
			}
			if !tc.wantOK {
				if holder.Reserve.Held() || holder.Reserve.Groups != nil {
					t.Errorf("held %v for groups %v, want nothing", holder.Reserve.Held(), holder.Reserve.Groups)
				}
				return
			}
			if !strings.HasPrefix(out.Plan.Message, "for its job ns/j holds room for 3 members") || !strings.Contains(out.Plan.Message, tc.wantMsg) {
				t.Errorf("plan message %q, want it to name the job and its 3 members, and say %q", out.Plan.Message, tc.wantMsg)
			}
			var got []string
			for _, p := range []*v1.Pod{a0, b0, b1} {
				if holder.Reserve.Node[p.UID] == "" {
					t.Errorf("%s holds no room", p.Name)
				}
				got = append(got, holder.Reserve.Node[p.UID])
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.wantNodes) {
				t.Errorf("room held on %v, want %v", got, tc.wantNodes)
			}
			if !slices.Equal(holder.Reserve.Groups, []string{"ns/b"}) {
				t.Errorf("the reservation holds for groups %v, want [ns/b]", holder.Reserve.Groups)
			}

			// Read by the registry: b's room is held (by a's gang), and its end clears b's too.
			r := NewRegistry(func(types.UID) bool { return false })
			r.gangs[holder.Key()] = holder
			if h := r.HolderOf("ns/b"); h != holder || !r.Holds("ns/b") || r.Holds("ns/c") {
				t.Errorf("HolderOf(b) = %v, Holds(b) %v, Holds(c) %v; want a's gang, true, false", h, r.Holds("ns/b"), r.Holds("ns/c"))
			}
			e := holder.StepReservation(args, resv.Input{Event: resv.QuorumReached, Now: t0.Add(time.Second)})
			if d := r.Applied(holder, e); !slices.Equal(d.Groups, []string{"ns/b"}) || holder.Reserve.Groups != nil {
				t.Errorf("at its end: done groups %v, held groups %v; want [ns/b] handed on, none kept", d.Groups, holder.Reserve.Groups)
			}
			if r.Holds("ns/b") {
				t.Error("b's room is still held after the end")
			}
		})
	}
}

// TestJobRoomIsTheSameWhoeverAsks: the job's room (its members and their order) does not depend on
// which group's member asks, so that a recheck by another group finds the same plan (no nominations
// moved for nothing).
func TestJobRoomIsTheSameWhoeverAsks(t *testing.T) {
	a0, a1 := gangtest.Member("a-0", "a", "1"), gangtest.Member("a-1", "a", "1")
	b0 := gangtest.Member("b-0", "b", "2")
	byA := &JobPreemption{Groups: []gangfit.Group{{Key: "ns/a", Candidates: []*v1.Pod{a1, a0}, Need: 2}, {Key: "ns/b", Candidates: []*v1.Pod{b0}, Need: 1}}}
	byB := &JobPreemption{Groups: []gangfit.Group{{Key: "ns/b", Candidates: []*v1.Pod{b0}, Need: 1}, {Key: "ns/a", Candidates: []*v1.Pod{a0, a1}, Need: 2}}}
	names := func(r *Room) []string {
		var out []string
		for _, p := range r.Candidates {
			out = append(out, p.Name)
		}
		return out
	}
	if x, y := names(byA.room()), names(byB.room()); !slices.Equal(x, y) || len(x) != 3 {
		t.Errorf("room asked by a %v, by b %v; want the same 3 members", x, y)
	}
}

// TestJobToReserve: the job a group reserves for is the same whichever group asks: its holder (the
// group holding a reservation already, else the first by name with the members its minimum needs)
// and the groups the holder's own check places with it. Of K of N alike replicas, those closest to
// ready; among unlike groups, the way of the fewest members; a job it cannot say (a nested topology,
// a group's own required one, no gang composite) reserves group by group.
func TestJobToReserve(t *testing.T) {
	index := indexOf
	serve := tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 2, Domain: gangtest.BlockKey}
	decode := tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 4, Parent: "serve"}
	prefill := tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: "serve"}
	set := tree.Node{Namespace: "ns", Name: "set", Composite: true, Gang: true, Min: 2}
	replica := func(name string) tree.Node {
		return tree.Node{Namespace: "ns", Name: name, Gang: true, Min: 2, Parent: "set"}
	}
	replicas := index(set, replica("r0"), replica("r1"), replica("r2"))
	pods := map[string][]*v1.Pod{"decode": role("decode", 4, "1"), "prefill": role("prefill", 2, "1"), "extra": role("extra", 1, "1"),
		"r0": role("r0", 2, "1"), "r1": role("r1", 2, "1"), "r2": role("r2", 2, "1"), "big": role("big", 4, "1")}
	// gangs: r2 has a member reserved (closest to ready); r1 holds a reservation.
	reserved := func() map[string]*Gang {
		g := New("ns", "r2", "uid-r2")
		g.CountReserved(pods["r2"][0].UID, "n1")
		return map[string]*Gang{g.Key(): g}
	}
	holding := func() map[string]*Gang {
		g := New("ns", "r1", "uid-r1")
		g.Reserve.Phase = resv.Held
		return map[string]*Gang{g.Key(): g}
	}
	short, fewDecode := maps.Clone(pods), maps.Clone(pods)
	short["r0"], fewDecode["decode"] = pods["r0"][:1], pods["decode"][:3]
	cases := []struct {
		name  string
		x     *tree.Index
		asker string
		own   map[string]string
		gangs func() map[string]*Gang
		pods  map[string][]*v1.Pod
		// want: the holder, then each group with its need; empty: the group reserves alone.
		want   []string
		domain string
		// parts: the innermost composite (or group) of each part of its room ("": the job's domain).
		parts []string
	}{
		{name: "two roles, asked by decode", x: index(serve, decode, prefill), asker: "decode", want: []string{"ns/decode", "ns/decode:4", "ns/prefill:2"}, domain: gangtest.BlockKey},
		{name: "two roles, asked by prefill: the same job", x: index(serve, decode, prefill), asker: "prefill", want: []string{"ns/decode", "ns/decode:4", "ns/prefill:2"}, domain: gangtest.BlockKey},
		{name: "two roles, the first short of members: the second holds it", x: index(serve, decode, prefill), asker: "decode", pods: fewDecode, want: []string{"ns/prefill", "ns/prefill:2", "ns/decode:4"}, domain: gangtest.BlockKey},
		{name: "K of N replicas: the first two", x: replicas, asker: "r0", want: []string{"ns/r0", "ns/r0:2", "ns/r1:2"}},
		{name: "K of N replicas, asked by one left out: the same", x: replicas, asker: "r2", want: []string{"ns/r0", "ns/r0:2", "ns/r1:2"}},
		{name: "K of N replicas: the one closest to ready is taken", x: replicas, asker: "r1", gangs: reserved, want: []string{"ns/r0", "ns/r0:2", "ns/r2:1"}},
		{name: "K of N replicas: the group holding a reservation holds the job's", x: replicas, asker: "r0", gangs: holding, want: []string{"ns/r1", "ns/r1:2", "ns/r0:2"}},
		{name: "K of N replicas, one short of members: the two with theirs", x: replicas, asker: "r0", pods: short, want: []string{"ns/r1", "ns/r1:2", "ns/r2:2"}},
		{name: "K of N replicas, the first larger: the two others, though the first's own choice is alike", x: index(set,
			tree.Node{Namespace: "ns", Name: "big", Gang: true, Min: 4, Parent: "set"}, replica("r1"), replica("r2")), asker: "big", want: []string{"ns/r1", "ns/r1:2", "ns/r2:2"}},
		{name: "K of N among unlike groups: the way of the fewest members, whichever asks", x: index(serve, decode, prefill,
			tree.Node{Namespace: "ns", Name: "extra", Gang: true, Min: 1, Parent: "serve"}), asker: "decode", want: []string{"ns/extra", "ns/extra:1", "ns/prefill:2"}, domain: gangtest.BlockKey},
		{name: "K of N among unlike groups, asked by prefill: the same", x: index(serve, decode, prefill,
			tree.Node{Namespace: "ns", Name: "extra", Gang: true, Min: 1, Parent: "serve"}), asker: "prefill", want: []string{"ns/extra", "ns/extra:1", "ns/prefill:2"}, domain: gangtest.BlockKey},
		{name: "K of N among unlike groups, decode holding the room: its own way of the fewest", x: index(serve, decode, prefill,
			tree.Node{Namespace: "ns", Name: "extra", Gang: true, Min: 1, Parent: "serve"}), asker: "prefill", gangs: func() map[string]*Gang {
			g := New("ns", "decode", "uid-decode")
			g.Reserve.Phase = resv.Held
			return map[string]*Gang{g.Key(): g}
		}, want: []string{"ns/decode", "ns/decode:4", "ns/extra:1"}, domain: gangtest.BlockKey},
		{name: "a composite below with a rack of its own: one part, in a rack", x: index(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 1, Domain: gangtest.BlockKey},
			tree.Node{Namespace: "ns", Name: "rep", Composite: true, Gang: true, Min: 2, Parent: "serve", Domain: gangtest.RackKey},
			tree.Node{Namespace: "ns", Name: "decode", Gang: true, Min: 4, Parent: "rep"}, tree.Node{Namespace: "ns", Name: "prefill", Gang: true, Min: 2, Parent: "rep"}),
			asker: "decode", want: []string{"ns/decode", "ns/decode:4", "ns/prefill:2"}, domain: gangtest.BlockKey, parts: []string{"ns/rep"}},
		{name: "a group requires a rack of its own: in parts, the other in the block", x: index(serve, decode, prefill), asker: "decode", own: map[string]string{"ns/prefill": gangtest.RackKey},
			want: []string{"ns/decode", "ns/decode:4", "ns/prefill:2"}, domain: gangtest.BlockKey, parts: []string{"ns/prefill", ""}},
		{name: "K of N replicas each in a rack of its own: a part each", x: replicas, asker: "r2", own: map[string]string{"ns/r0": gangtest.RackKey, "ns/r1": gangtest.RackKey, "ns/r2": gangtest.RackKey},
			want: []string{"ns/r0", "ns/r0:2", "ns/r1:2"}, parts: []string{"ns/r0", "ns/r1"}},
		{name: "a group whose policy cannot be read", x: index(serve, decode, prefill), asker: "decode", own: map[string]string{"ns/prefill": ""}},
		{name: "in no gang composite", x: index(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Min: 1}, decode, prefill), asker: "decode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root, _ := tc.x.Resolve("ns", tc.asker)
			gangs := map[string]*Gang{}
			if tc.gangs != nil {
				gangs = tc.gangs()
			}
			g := gangs["ns/"+tc.asker]
			if g == nil {
				g = New("ns", tc.asker, "uid")
				gangs[g.Key()] = g
			}
			all := pods
			if tc.pods != nil {
				all = tc.pods
			}
			in := treeIn(g, all[tc.asker][0], 0, gangtest.RackedCluster(), gangs, root, all)
			in.OwnDomain = tc.own
			j, ok := JobToReserve(in, root, g.Key())
			var got []string
			if ok {
				got = append(got, j.Holder)
				for _, gr := range j.Groups {
					got = append(got, fmt.Sprintf("%s:%d", gr.Key, gr.Need))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("JobToReserve: holder and groups %v, want %v", got, tc.want)
			}
			if !ok {
				return
			}
			members := 0
			for i, gr := range j.Groups {
				if j.Keys[i] != gr.Key {
					t.Errorf("keys %v do not follow the groups", j.Keys)
				}
				members += len(all[strings.TrimPrefix(gr.Key, "ns/")])
			}
			if j.Job != root.JobOf(g.Key()).Key() || len(j.Members) != members {
				t.Errorf("job %s with %d members, want %s with %d", j.Job, len(j.Members), root.JobOf(g.Key()).Key(), members)
			}
			if (j.Domain == nil) != (tc.domain == "") || j.Domain != nil && j.Domain.Key != tc.domain {
				t.Errorf("domain %+v, want %q", j.Domain, tc.domain)
			}
			var parts []string
			for _, p := range j.Parts {
				inner := ""
				if len(p.Chain) > 0 {
					inner = p.Chain[len(p.Chain)-1].Composite
				}
				parts = append(parts, inner)
			}
			if !slices.Equal(parts, tc.parts) {
				t.Errorf("parts %q, want %q", parts, tc.parts)
			}
		})
	}
}

// TestJobReservationEndsWhenItsGroupsChange: a reservation held for a job's groups ends (every
// group's nominations cleared) when the gang next reserves for other groups, here alone (its job's
// composite gone), before it reserves again.
func TestJobReservationEndsWhenItsGroupsChange(t *testing.T) {
	args := resv.Args{After: time.Minute, Timeout: 10 * time.Minute, MaxGangs: 1, Recheck: 10 * time.Second, StallAfter: 30 * time.Second}
	m := gangtest.Member("a-0", "a", "1")
	g := New("ns", "a", "uid")
	g.Reserve.State = resv.State{Phase: resv.Held, WaitingSince: t0.Add(-5 * time.Minute), Since: t0.Add(-time.Minute), PlannedAt: t0.Add(-time.Second), LastTried: t0.Add(-time.Second), Prio: 0, Seen: true}
	g.Reserve.Hold(gangfit.ReservationPlan{OK: true, Assignment: []gangfit.Nomination{{Pod: m, Node: "n1"}}, Nodes: []string{"n1"}})
	g.Reserve.Groups = []string{"ns/b"}
	r := NewRegistry(func(types.UID) bool { return false })
	r.gangs[g.Key()] = g
	in := ReserveIn{Args: args, Now: t0, Pod: m, PodGroup: gangtest.PodGroup("ns", "a", 1, t0), Logger: klog.Background(),
		Members: func() []*v1.Pod { return []*v1.Pod{m} }, Queue: func(int32) (int, bool) { return 0, false },
		Nodes: func() ([]fwk.NodeInfo, error) { return nil, nil }, Claims: func(int32) []*v1.Pod { return nil }}
	out := g.ReserveRoom(in)
	if len(out.Steps) < 2 || out.Steps[0].End != resv.EndNoRoom {
		t.Fatalf("steps %+v, want the held reservation ended first", out.Steps)
	}
	if d := r.Applied(g, out.Steps[0]); !slices.Equal(d.Groups, []string{"ns/b"}) || g.Reserve.Held() {
		t.Errorf("the end clears groups %v (held %v), want [ns/b] and nothing held", d.Groups, g.Reserve.Held())
	}
}

// TestOwnDomains: the required topology key of a group of its own (its spec's, its members'
// annotation, the profile's default) is read by key; a group whose policy cannot be read maps to "".
func TestOwnDomains(t *testing.T) {
	plain := gangtest.PodGroup("ns", "plain", 1, t0)
	racked := gangtest.PodGroup("ns", "racked", 1, t0)
	racked.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: gangtest.RackKey}
	preferring := gangtest.PodGroup("ns", "preferring", 1, t0)
	preferring.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Preferred: []v1alpha1.TopologyKey{gangtest.RackKey}}
	annotated := gangtest.Member("annotated-0", "annotated", "1")
	annotated.Annotations = map[string]string{gangfit.AnnotationTopologyRequired: gangtest.RackKey}
	groups := map[string]*v1alpha1.PodGroup{"plain": plain, "racked": racked, "preferring": preferring, "annotated": gangtest.PodGroup("ns", "annotated", 1, t0)}
	get := func(_, name string) *v1alpha1.PodGroup { return groups[name] }
	members := func(_, name string) []*v1.Pod {
		if name == "annotated" {
			return []*v1.Pod{annotated}
		}
		return nil
	}
	var leaves []tree.Node
	for _, name := range []string{"plain", "racked", "preferring", "annotated", "gone"} {
		leaves = append(leaves, tree.Node{Namespace: "ns", Name: name})
	}
	got := OwnDomains(leaves, get, members, config.TopologyPolicy{})
	want := map[string]string{"ns/racked": gangtest.RackKey, "ns/annotated": gangtest.RackKey, "ns/gone": ""}
	if !maps.Equal(got, want) {
		t.Errorf("OwnDomains = %v, want %v", got, want)
	}
	if got := OwnDomains(leaves[:1], get, members, config.TopologyPolicy{Required: gangtest.RackKey}); got["ns/plain"] != gangtest.RackKey {
		t.Errorf("with the profile's default required key: %v, want ns/plain's rack", got)
	}
}
