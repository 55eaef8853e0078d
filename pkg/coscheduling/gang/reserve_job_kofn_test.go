package gang

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// indexOf is a tree index of nodes.
func indexOf(nodes ...tree.Node) *tree.Index {
	x := tree.NewIndex()
	for _, n := range nodes {
		x.Set(n)
	}
	return x
}

// step asks JobToReserve as asker and runs the holder's ReserveRoom; it reports the end, if any.
func kofnStep(t *testing.T, x *tree.Index, asker string, gangs map[string]*Gang, pods map[string][]*v1.Pod, ahead bool) (JobPreemption, string) {
	root, _ := x.Resolve("ns", asker)
	in := treeIn(gangs["ns/"+asker], pods[asker][0], 0, gangtest.RackedCluster(), gangs, root, pods)
	j, ok := JobToReserve(in, root, "ns/"+asker)
	if !ok {
		t.Fatalf("no job")
	}
	h := gangs[j.Holder]
	args := resv.Args{After: time.Minute, Timeout: 10 * time.Minute, MaxGangs: 1, Recheck: 10 * time.Second, StallAfter: 30 * time.Second}
	out := h.ReserveRoom(ReserveIn{Args: args, Now: t0, Pod: pods[asker][0], PodGroup: gangtest.PodGroup("ns", h.Name, 1, t0), Logger: klog.Background(), Job: &j,
		Members: func() []*v1.Pod { return j.Members },
		Queue:   func(int32) (int, bool) { return 0, ahead },
		Nodes:   func() ([]fwk.NodeInfo, error) { return gangtest.RackedCluster(), nil },
		Claims:  func(int32) []*v1.Pod { return nil }})
	end := ""
	for _, e := range out.Steps {
		if e.End != "" {
			end = e.End + ": " + e.EndMessage
		}
	}
	return j, end
}

func kofnHeld(g *Gang, groups ...string) {
	g.Reserve.State = resv.State{Phase: resv.Held, Since: t0.Add(-time.Minute), PlannedAt: t0, WaitingSince: t0.Add(-3 * time.Minute), LastTried: t0, Prio: 0}
	g.Reserve.Groups = groups
}

// TestJobRoomKeepsItsReadyGroups: in an all-of-3 job, a group becoming ready (its members reserved at
// Permit) stays one of the job's groups: the held reservation does not end (with another gang ahead,
// it would not be taken again).
func TestJobRoomKeepsItsReadyGroups(t *testing.T) {
	x := indexOf(tree.Node{Namespace: "ns", Name: "serve", Composite: true, Gang: true, Min: 3},
		tree.Node{Namespace: "ns", Name: "a", Gang: true, Min: 1, Parent: "serve"},
		tree.Node{Namespace: "ns", Name: "b", Gang: true, Min: 1, Parent: "serve"},
		tree.Node{Namespace: "ns", Name: "c", Gang: true, Min: 1, Parent: "serve"})
	pods := map[string][]*v1.Pod{"a": role("a", 1, "1"), "b": role("b", 1, "1"), "c": role("c", 1, "1")}
	gangs := map[string]*Gang{"ns/a": New("ns", "a", "ua"), "ns/b": New("ns", "b", "ub"), "ns/c": New("ns", "c", "uc")}
	kofnHeld(gangs["ns/a"], "ns/b", "ns/c")
	if j, end := kofnStep(t, x, "c", gangs, pods, true); end != "" {
		t.Fatalf("keys %v: ended at once: %s", j.Keys, end)
	}
	gangs["ns/b"].CountReserved(pods["b"][0].UID, "r1-0") // b's member at Permit, waiting for the job
	j, end := kofnStep(t, x, "c", gangs, pods, true)
	t.Logf("keys %v, end %q, held %v", j.Keys, end, gangs["ns/a"].Reserve.Held())
	if end != "" || !gangs["ns/a"].Reserve.Held() {
		t.Errorf("b reached Permit: the job's reservation ended (%s) and is not held again (another gang ahead); b waits at Permit for c, whose room is gone", end)
	}
}

// TestJobRoomKeepsItsReplicas: of 2 of 3 replicas, the reservation keeps the replica it holds room for
// while it is a choice: a left-out replica's member reserved does not move it.
func TestJobRoomKeepsItsReplicas(t *testing.T) {
	x := indexOf(tree.Node{Namespace: "ns", Name: "set", Composite: true, Gang: true, Min: 2},
		tree.Node{Namespace: "ns", Name: "r0", Gang: true, Min: 2, Parent: "set"},
		tree.Node{Namespace: "ns", Name: "r1", Gang: true, Min: 2, Parent: "set"},
		tree.Node{Namespace: "ns", Name: "r2", Gang: true, Min: 2, Parent: "set"})
	pods := map[string][]*v1.Pod{"r0": role("r0", 2, "1"), "r1": role("r1", 2, "1"), "r2": role("r2", 2, "1")}
	gangs := map[string]*Gang{"ns/r0": New("ns", "r0", "u0"), "ns/r1": New("ns", "r1", "u1"), "ns/r2": New("ns", "r2", "u2")}
	kofnHeld(gangs["ns/r0"], "ns/r1")
	gangs["ns/r2"].CountReserved(pods["r2"][0].UID, "r1-0")
	j, end := kofnStep(t, x, "r1", gangs, pods, false)
	t.Logf("r2 has a member reserved: keys %v, end %q", j.Keys, end)
	if end != "" {
		t.Errorf("the held reservation for r1 ended because a member of r2 was reserved: %s", end)
	}
}

// TestHolderOfTheFirstByKey: should two gangs hold room for one group (while a job's groups change),
// the holder named is the first by key, whatever the map's order.
func TestHolderOfTheFirstByKey(t *testing.T) {
	r := NewRegistry(func(types.UID) bool { return false })
	for _, name := range []string{"b", "a", "d"} {
		g := New("ns", name, types.UID("uid-"+name))
		g.Reserve.Phase = resv.Held
		g.Reserve.Groups = []string{"ns/c"}
		r.gangs[g.Key()] = g
	}
	for range 20 {
		if h := r.HolderOf("ns/c"); h == nil || h.Key() != "ns/a" {
			t.Fatalf("HolderOf(c) = %v, want ns/a", h)
		}
	}
}

// TestJobHas: a job's room is for the groups it takes (of K of N, not the others).
func TestJobHas(t *testing.T) {
	j := &JobPreemption{Keys: []string{"ns/r0", "ns/r1"}}
	if !j.Has("ns/r1") || j.Has("ns/r2") || (*JobPreemption)(nil).Has("ns/r0") {
		t.Errorf("Has(r1) %v, Has(r2) %v, nil job Has(r0) %v; want true, false, false", j.Has("ns/r1"), j.Has("ns/r2"), (*JobPreemption)(nil).Has("ns/r0"))
	}
}
