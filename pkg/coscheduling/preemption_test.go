package coscheduling

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/claims"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// TestClaims: room nominated to pods of at least the gang's priority, other than its own members, is
// not free for the whole-gang check; bound, finished or lower-priority claims are not counted.
func TestClaims(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nominatedTo := func(name, group, node string, prio int32) *v1.Pod {
		p := running(name, group, "", "4", prio)
		p.Status.NominatedNodeName = node
		return p
	}
	var c claims.Claims
	for _, p := range []*v1.Pod{
		nominatedTo("other-gang", "other", "n0", 100),
		nominatedTo("low", "", "n1", 10),
		nominatedTo("own", "hi", "n1", 100),
	} {
		if !c.Set(p) {
			t.Fatalf("claim of %s not recorded", p.Name)
		}
	}
	bound := nominatedTo("bound", "", "n1", 1000)
	bound.Spec.NodeName = "n1"
	if c.Set(bound) {
		t.Errorf("a bound pod's nomination was recorded")
	}
	against := c.Against(100, "ns/hi")
	if len(against) != 1 || against[0].Name != "other-gang" {
		t.Fatalf("claims against ns/hi at priority 100 = %v, want [other-gang]", against)
	}
	nodes := []fwk.NodeInfo{cpuNode("n0", "4"), cpuNode("n1", "4")}
	if res, _ := gangfit.Check(logger, "ns/hi", highGang(2, "4"), 2, nodes, nil, nil, against, nil); res.Feasible {
		t.Errorf("gang feasible on room nominated to another gang")
	}
	if res, _ := gangfit.Check(logger, "ns/hi", highGang(1, "4"), 1, nodes, nil, nil, against, nil); !res.Feasible {
		t.Errorf("gang of one infeasible though n1 is free: %s", res.Message)
	}
	// The nomination dropped (the pod bound elsewhere or deleted): nothing is claimed any more.
	if !c.Forget(against[0]) || len(c.Against(100, "ns/hi")) != 0 {
		t.Errorf("forgetting the claim left it counted")
	}
}

// TestClaimsOfAssumedMembers: a gang member reserved on a node is counted there by the snapshot; the
// nomination the scheduler gives it while it waits at Permit and binds claims nothing more, and does
// not make cached checks stale. Unreserved, a later nomination claims again; bound, it is forgotten.
// The same for a pod of no gang.
func TestClaimsOfAssumedMembers(t *testing.T) {
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Now()), makePG("ns", "g2", 2, time.Now())}, nil)
	ctx := context.Background()
	m := running("m0", "g", "", "4", 100)
	if s := env.pl.Reserve(ctx, framework.NewCycleState(), m, "n0"); !passed(s) {
		t.Fatal(s)
	}
	waiting := m.DeepCopy()
	waiting.Status.NominatedNodeName = "n0"
	epoch := env.pl.epoch.Load()
	if env.pl.claims.Set(waiting) || len(env.pl.claims.Against(0, "ns/other")) != 0 {
		t.Fatal("the nomination of a member waiting at Permit was recorded as a claim")
	}
	if env.pl.epoch.Load() != epoch {
		t.Error("the nomination of an assumed member made cached checks stale")
	}

	env.pl.Unreserve(ctx, framework.NewCycleState(), m, "n0")
	if !env.pl.claims.Set(waiting) || len(env.pl.claims.Against(0, "ns/other")) != 1 {
		t.Fatal("an unreserved member's nomination claims nothing")
	}

	// A pod of no gang, reserved and binding (the scheduler nominates it to its node as its binding
	// starts): its nomination claims nothing either, and it is forgotten once bound.
	lone := running("lone", "", "", "4", 100)
	if s := env.pl.Reserve(ctx, framework.NewCycleState(), lone, "n0"); !passed(s) {
		t.Fatal(s)
	}
	binding := lone.DeepCopy()
	binding.Status.NominatedNodeName = "n0"
	if env.pl.claims.Set(binding) || env.pl.claims.Len() != 1 {
		t.Fatalf("the nomination of a binding pod of no gang was recorded as a claim (%d claims)", env.pl.claims.Len())
	}
	binding.Spec.NodeName = "n0"
	env.pl.claims.Set(binding)
	if n := env.pl.claims.Assumed(); n != 0 {
		t.Errorf("a bound pod of no gang is still marked assumed (%d)", n)
	}

	// Another member reserved, then bound: forgotten.
	m = running("m1", "g2", "", "4", 100)
	if s := env.pl.Reserve(ctx, framework.NewCycleState(), m, "n0"); !passed(s) {
		t.Fatal(s)
	}
	waiting = m.DeepCopy()
	waiting.Status.NominatedNodeName = "n0"
	bound := waiting.DeepCopy()
	bound.Spec.NodeName = "n0"
	env.pl.claims.Set(bound)
	if n := env.pl.claims.Assumed(); n != 0 {
		t.Errorf("a bound member is still marked assumed (%d)", n)
	}
}

// TestReserveDropsClaim: a nominated pod, once reserved, is assumed on its node: its claim goes, so
// the room is not counted twice.
func TestReserveDropsClaim(t *testing.T) {
	env := newTestEnv(t, defaultArgs(), nil, nil)
	p := running("preemptor", "", "", "4", 100)
	p.Status.NominatedNodeName = "n0"
	env.pl.claims.Set(p)
	if got := env.pl.claims.Against(0, ""); len(got) != 1 {
		t.Fatalf("claims before Reserve = %d, want 1", len(got))
	}
	if st := env.pl.Reserve(context.Background(), nil, p, "n0"); !st.IsSuccess() {
		t.Fatal(st)
	}
	if got := env.pl.claims.Against(0, ""); len(got) != 0 {
		t.Errorf("claims after Reserve = %v, want none", got)
	}
}
