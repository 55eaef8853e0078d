package loadaware

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
)

// fakeHandle is the part of fwk.Handle the refresher uses: the node lister and Activate.
type fakeHandle struct {
	fwk.Handle
	factory   informers.SharedInformerFactory
	activated map[string]*v1.Pod
}

func (h *fakeHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.factory }
func (h *fakeHandle) ProfileName() string                                    { return "requeue-test" }
func (h *fakeHandle) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	for k, p := range pods {
		h.activated[k] = p
	}
}

// TestRequeueWhenLoadDrops: a pod the Filter rejected is activated after a refresh in which a node
// cooled down enough for its estimate, not before; and when a node's sample expires (it passes then).
func TestRequeueWhenLoadDrops(t *testing.T) {
	ctx := context.Background()
	// The informers are never started: the test fills the node cache itself.
	factory := informers.NewSharedInformerFactory(nil, 0)
	node := st.MakeNode().Name("n").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "10", v1.ResourceMemory: "10Gi"}).Obj()
	if err := factory.Core().V1().Nodes().Informer().GetIndexer().Add(node); err != nil {
		t.Fatal(err)
	}
	h := &fakeHandle{factory: factory, activated: map[string]*v1.Pod{}}
	pl := newTestPlugin(t, defaultArgs(t))
	pl.handle, pl.profile = h, h.ProfileName()
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	pl.onNodeUpsert(klog.Background(), node)

	pod := podWith("rejected", "1", "")
	reject := func() {
		t.Helper()
		cs := framework.NewCycleState()
		if _, s := pl.PreFilter(ctx, cs, pod, nil); !s.IsSuccess() {
			t.Fatalf("PreFilter: %v", s)
		}
		if s := pl.Filter(ctx, cs, pod, ni); s.Code() != fwk.UnschedulableAndUnresolvable {
			t.Fatalf("Filter = %v, want UnschedulableAndUnresolvable", s)
		}
		// A second rejection in the same cycle is not counted twice.
		pl.Filter(ctx, cs, pod, ni)
	}
	refresh := func(cpu string) {
		pl.clock.Step(time.Minute)
		pl.lister.set(pl.clock.Now(), map[string][2]string{"n": {cpu, "1Gi"}})
		pl.refreshNow(t)
	}

	refresh("9500m")
	reject()
	if pl.rejected.n.Load() != 1 {
		t.Fatalf("%d pods remembered, want 1", pl.rejected.n.Load())
	}
	refresh("9")
	if len(h.activated) != 0 {
		t.Fatalf("activated %v although 9 + 0.85 cpu is still over 80%%", h.activated)
	}
	refresh("2")
	if h.activated["rejected"] == nil || pl.rejected.n.Load() != 0 {
		t.Fatalf("after the node cooled down: activated %v, %d still remembered; want the pod activated", h.activated, pl.rejected.n.Load())
	}

	h.activated = map[string]*v1.Pod{}
	refresh("9500m")
	reject()
	pl.lister.items = nil
	pl.clock.Step(181 * time.Second)
	pl.refreshNow(t)
	if h.activated["rejected"] == nil {
		t.Fatalf("after the node's sample expired: activated %v, want the pod (the node passes now)", h.activated)
	}
}

func TestPodEventsForgetRejectedPods(t *testing.T) {
	pl := newTestPlugin(t, defaultArgs(t))
	pod := podWith("p", "1", "")
	pl.rejected.add(pod, usage{MilliCPU: 850})
	bound := pod.DeepCopy()
	bound.Spec.NodeName = "n"
	pl.onPodUpsert(bound)
	if pl.rejected.n.Load() != 0 {
		t.Fatal("a pod bound elsewhere is still remembered for requeueing")
	}
	pl.rejected.add(pod, usage{MilliCPU: 850})
	pl.onPodDelete(pod)
	if pl.rejected.n.Load() != 0 {
		t.Fatal("a deleted pod is still remembered for requeueing")
	}
}

// TestRejectSuspendedBelowTheFloor: with filterMissingMetrics=Reject, a pod kept off the nodes
// without a sample is activated when the metrics source answers with (almost) nothing: fewer than
// half of the nodes with a fresh sample is taken as an outage, and every node passes then.
func TestRejectSuspendedBelowTheFloor(t *testing.T) {
	ctx := context.Background()
	factory := informers.NewSharedInformerFactory(nil, 0)
	h := &fakeHandle{factory: factory, activated: map[string]*v1.Pod{}}
	pl := newTestPlugin(t, defaultArgs(t, func(a *config.LoadAwareArgs) { a.FilterMissingMetrics = config.LoadAwareMissingMetricsReject }))
	pl.handle, pl.profile = h, h.ProfileName()
	var infos []fwk.NodeInfo
	for _, name := range []string{"a", "b", "c", "unsampled"} {
		infos = append(infos, nodeInfo(name, "10", "10Gi"))
	}
	pl.addNodes(infos...)
	refresh := func(sampled ...string) {
		pl.clock.Step(15 * time.Second)
		usages := map[string][2]string{}
		for _, n := range sampled {
			usages[n] = [2]string{"1", "1Gi"}
		}
		pl.lister.set(pl.clock.Now(), usages)
		pl.refreshNow(t)
	}
	refresh("a", "b", "c")
	pod := podWith("kept-off", "1", "")
	cs := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, cs, pod, nil); !s.IsSuccess() {
		t.Fatalf("PreFilter = %v, want the Filter to run", s)
	}
	if s := pl.Filter(ctx, cs, pod, infos[3]); s.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("Filter on the node without a sample = %v, want UnschedulableAndUnresolvable", s)
	}
	// Two of four is still half: rejection stays, nobody is activated.
	refresh("a", "b")
	if len(h.activated) != 0 || !pl.rejecting.Load() {
		t.Fatalf("with 2 of 4 nodes sampled: rejecting %v, activated %v; want rejecting, none activated", pl.rejecting.Load(), h.activated)
	}
	// An empty answer: an outage of the source, not of the nodes.
	pl.clock.Step(4 * time.Minute)
	refresh()
	if pl.rejecting.Load() || h.activated["kept-off"] == nil {
		t.Fatalf("after an empty answer: rejecting %v, activated %v; want rejection suspended and the pod activated", pl.rejecting.Load(), h.activated)
	}
	cs = framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, cs, pod, nil); !s.IsSkip() {
		t.Errorf("PreFilter during the outage = %v, want Skip (nothing to filter on)", s)
	}
}
