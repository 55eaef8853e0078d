package gangfit

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestFreeCapacityRandomized changes a cluster at random between checks (pods added and removed,
// nodes updated, nodes added and removed, checks tracking other extended resources) and compares the
// shared table with free capacity computed afresh after each change. SEED=<n> replays a failure.
func TestFreeCapacityRandomized(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewSource(seed))
	logger, _ := ktesting.NewTestContext(t)
	defer func() {
		if t.Failed() {
			t.Logf("replay with SEED=%d", seed)
		}
	}()
	extended := []v1.ResourceName{"example.com/gpu", "example.com/fpga", "example.com/nic"}
	makeNode := func(name string) *v1.Node {
		capacity := map[v1.ResourceName]string{v1.ResourceCPU: strconv.Itoa(2 + rng.Intn(8)), v1.ResourceMemory: "16Gi", v1.ResourcePods: strconv.Itoa(1 + rng.Intn(5))}
		for _, r := range extended {
			if rng.Intn(2) == 0 {
				capacity[r] = strconv.Itoa(rng.Intn(4))
			}
		}
		return st.MakeNode().Name(name).Capacity(capacity).Obj()
	}
	makePod := func(i int) *v1.Pod {
		req := map[v1.ResourceName]string{v1.ResourceCPU: strconv.Itoa(1 + rng.Intn(3))}
		if rng.Intn(2) == 0 {
			req[extended[rng.Intn(len(extended))]] = "1"
		}
		return st.MakePod().Namespace("ns").Name(fmt.Sprintf("p%d", i)).UID(fmt.Sprintf("p%d", i)).Req(req).Obj()
	}

	for round := range 20 {
		var nodes []fwk.NodeInfo
		for i := range 1 + rng.Intn(8) {
			ni := framework.NewNodeInfo()
			ni.SetNode(makeNode(fmt.Sprintf("n%d", i)))
			nodes = append(nodes, ni)
		}
		var shared Shared
		pods := 0
		for step := range 60 {
			ni := nodes[rng.Intn(len(nodes))].(*framework.NodeInfo)
			switch rng.Intn(6) {
			case 0, 1:
				ni.AddPod(makePod(pods))
				pods++
			case 2:
				if ps := ni.GetPods(); len(ps) > 0 {
					if err := ni.RemovePod(logger, ps[rng.Intn(len(ps))].GetPod()); err != nil {
						t.Fatal(err)
					}
				}
			case 3:
				ni.SetNode(makeNode(ni.Node().Name))
			case 4:
				if rng.Intn(3) == 0 {
					added := framework.NewNodeInfo()
					added.SetNode(makeNode(fmt.Sprintf("n%d", len(nodes)+step*100)))
					nodes = append(nodes, added)
				} else if len(nodes) > 1 {
					i := rng.Intn(len(nodes))
					nodes = append(nodes[:i:i], nodes[i+1:]...)
				}
			}
			var want scalarNames
			for _, r := range extended {
				if rng.Intn(3) == 0 {
					want = append(want, r)
				}
			}
			got, names, totals, ok := shared.capacity.acquire(nodes, want)
			if !ok {
				t.Fatalf("round %d step %d: acquire refused a snapshot whose nodes all exist", round, step)
			}
			for _, r := range want {
				if names.index(r) < 0 {
					t.Fatalf("round %d step %d: %s is not tracked (names %v)", round, step, r, names)
				}
			}
			backing := make([]int64, len(names))
			var wantTotals resources
			for i, ni := range nodes {
				fresh := nodeFree(ni, names, backing)
				if got[i].node != fresh.node || got[i].slots != fresh.slots || !got[i].free.equal(fresh.free) {
					t.Fatalf("round %d step %d: node %s: shared %+v, afresh %+v", round, step, ni.Node().Name, got[i], fresh)
				}
				wantTotals.addClamped(fresh.free)
			}
			if !totals.equal(wantTotals) {
				t.Fatalf("round %d step %d: shared totals %+v, afresh %+v", round, step, totals, wantTotals)
			}
			shared.capacity.mu.Unlock()
		}
	}
}

// TestFreeCapacityPrivate checks that a check working on a copy (claimed room, preemption) leaves the
// shared table as the snapshot has it, and that the shared check agrees with one computed afresh.
func TestFreeCapacityPrivate(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes := []fwk.NodeInfo{node("n0", "4"), node("n1", "4")}
	gang := []*v1.Pod{member("m0", "g", "2"), member("m1", "g", "2")}
	var shared Shared

	f := New(logger, "ns/g", gang, 2, nodes, nil, nil, &shared, true)
	if f.release != nil {
		t.Fatal("a private check holds the shared table")
	}
	f.free[0].free.milliCPU = 0
	f.free[0].slots = 0

	claimed := st.MakePod().Namespace("ns").Name("c").UID("c").Req(map[v1.ResourceName]string{v1.ResourceCPU: "3"}).Obj()
	claimed.Status.NominatedNodeName = "n1"
	res, g := Check(logger, "ns/g", gang, 2, nodes, nil, nil, []*v1.Pod{claimed}, &shared)
	g.Done()
	// n0 has 4 CPUs (the private change above did not reach the table), n1 1 CPU after the claim:
	// the two members fit on n0.
	if !res.Feasible {
		t.Fatalf("gang infeasible: %s", res.Message)
	}
	res, g = Check(logger, "ns/g", append(gang, member("m2", "g", "2")), 3, nodes, nil, nil, []*v1.Pod{claimed}, &shared)
	g.Done()
	if res.Feasible {
		t.Fatal("3 members of 2 CPUs fit on 4+1 free CPUs")
	}
	free, _, _, _ := shared.capacity.acquire(nodes, nil)
	if free[1].free.milliCPU != 4000 || free[0].free.milliCPU != 4000 {
		t.Errorf("the shared table was changed by a check: %+v", free)
	}
	shared.capacity.mu.Unlock()

	for _, shared := range []*Shared{nil, {}} {
		res, g = Check(logger, "ns/g", append(gang, member("m2", "g", "2")), 3, nodes, nil, nil, nil, shared)
		g.Done()
		if !res.Feasible {
			t.Errorf("shared=%v: 3 members of 2 CPUs do not fit on 4+4 free CPUs: %s", shared != nil, res.Message)
		}
	}
}

// TestRequestCache checks that a member's request is reused for the same pod object, recomputed for
// an updated one (an in-place resize), and forgotten.
func TestRequestCache(t *testing.T) {
	var c requestCache
	p := member("m0", "g", "2")
	if got := c.of(p).milliCPU; got != 2000 {
		t.Fatalf("request %dm, want 2000m", got)
	}
	resized := p.DeepCopy()
	resized.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU].DeepCopy()
	q := resized.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]
	q.Add(q)
	resized.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = q
	if got := c.of(resized).milliCPU; got != 4000 {
		t.Fatalf("request of the resized pod %dm, want 4000m", got)
	}
	c.forget(p.UID)
	if _, ok := c.m.Load(types.UID("m0")); ok {
		t.Error("the request was not forgotten")
	}
}
