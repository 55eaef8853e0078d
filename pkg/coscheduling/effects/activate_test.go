package effects

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// activating is a framework handle that records what it is asked to activate.
type activating struct {
	fwk.Handle
	calls []map[string]*v1.Pod
}

func (h *activating) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	h.calls = append(h.calls, pods)
}

func TestActivate(t *testing.T) {
	a, b := st.MakePod().Namespace("ns").Name("a").Obj(), st.MakePod().Namespace("ns").Name("b").Obj()
	h := &activating{}
	Activate(klog.Background(), h)
	if len(h.calls) != 0 {
		t.Errorf("no pods: Activate called %d times, want none", len(h.calls))
	}
	Activate(klog.Background(), h, a, b)
	if len(h.calls) != 1 || len(h.calls[0]) != 2 || h.calls[0]["ns/a"] != a || h.calls[0]["ns/b"] != b {
		t.Errorf("Activate(a, b) asked %v, want one call with ns/a and ns/b", h.calls)
	}
}

func TestActivateInCycle(t *testing.T) {
	a, b := st.MakePod().Namespace("ns").Name("a").Obj(), st.MakePod().Namespace("ns").Name("b").Obj()
	state := framework.NewCycleState()
	toActivate := framework.NewPodsToActivate()
	state.Write(framework.PodsToActivateKey, toActivate)
	ActivateInCycle(state, []*v1.Pod{a, b})
	if len(toActivate.Map) != 2 || toActivate.Map["ns/a"] != a || toActivate.Map["ns/b"] != b {
		t.Errorf("PodsToActivate = %v, want ns/a and ns/b", toActivate.Map)
	}
	// A cycle without PodsToActivate: nothing to do, and nothing panics.
	ActivateInCycle(framework.NewCycleState(), []*v1.Pod{a})
}
