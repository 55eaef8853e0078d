package coscheduling

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// Costs per event, not per pod (issue #59).

// TestClaimTeardownRechecksBounded: a job's 300 allocated claims deleted together, the claim cache
// showing each gone at once, let a pending device gang's members in a bounded number of times (one
// wait and one activation pass per burst), not once per claim. Before the burst was coalesced each
// event activated them (300 passes, 300 stale checks).
func TestClaimTeardownRechecksBounded(t *testing.T) {
	env := pendingDeviceGang(t)
	env.pl.freed.Cache = func(_, _ string) (*resourceapi.ResourceClaim, error) { return nil, fmt.Errorf("not found") }
	epoch := env.pl.epoch.Load()
	h := env.pl.claimEventHandler()
	const claims = 300
	for i := range claims {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("job-%d-gpu", i), UID: "u"}}
		c.Status.Allocation = &resourceapi.AllocationResult{}
		h.OnDelete(c)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), claimCachePoll, claimCacheWait, true, func(context.Context) (bool, error) {
		return env.handle.activationPasses() > 0, nil
	}); err != nil {
		t.Fatalf("nothing activated after the teardown: %v", err)
	}
	time.Sleep(5 * claimCachePoll) // stragglers of the burst, if any
	passes, stale := env.handle.activationPasses(), env.pl.epoch.Load()-epoch
	t.Logf("%d claims deleted: %d activation passes, %d stale-check epochs", claims, passes, stale)
	if passes > 2 || stale > 2 {
		t.Errorf("%d claims deleted in one burst activated the pending gang %d times and made its check stale %d times, want at most 2", claims, passes, stale)
	}
}

// blockingDevices is a device model whose checks wait until released.
type blockingDevices struct {
	started, release chan struct{}
	once             sync.Once
}

func (b *blockingDevices) ForCheck(klog.Logger, []*v1.Pod) gangfit.DeviceCheck {
	b.once.Do(func() { close(b.started) })
	<-b.release
	return nil
}

// TestHintAnsweredWhileACheckRuns: while a gang's whole-gang check runs (a slow device check), the
// queueing hints and PreEnqueue, which take the plugin's lock, answer: nothing under the lock waits
// on a check. Before the check ran under the lock and the hint waited for it (the queue's own lock
// held meanwhile).
func TestHintAnsweredWhileACheckRuns(t *testing.T) {
	pods := []*v1.Pod{member("a", "g", "1"), member("b", "g", "1")}
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{})}, pods)
	b := &blockingDevices{started: make(chan struct{}), release: make(chan struct{})}
	env.pl.fit.Devices = b
	nodes := []fwk.NodeInfo{node("n1", "4")}
	checked := make(chan *fwk.Status)
	go func() {
		_, s := env.pl.PreFilter(context.Background(), framework.NewCycleState(), pods[0], nodes)
		checked <- s
	}()
	<-b.started
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		freed := member("x", "", "1")
		freed.Spec.NodeName = "n1"
		if hint, err := gang.CapacityFreedHint(env.pl.sparedByDelete, env.pl.stale)(klog.Background(), pods[1], freed, nil); err != nil || hint != fwk.Queue {
			t.Errorf("hint = %v, %v; want Queue", hint, err)
		}
		if s := env.pl.PreEnqueue(context.Background(), pods[1]); !s.IsSuccess() {
			t.Errorf("PreEnqueue = %v", s)
		}
	}()
	select {
	case <-answered:
	case <-time.After(30 * time.Second):
		t.Fatal("the queueing hint and PreEnqueue waited on a whole-gang check (30 s)")
	}
	close(b.release)
	if s := <-checked; !passed(s) {
		t.Errorf("PreFilter = %v once the check ended", s)
	}
}

// pendingDeviceGang is a gang of two tracked from its bound member, whose other member (ns/a) claims a
// device from a template and is not placed yet.
func pendingDeviceGang(t *testing.T) *testEnv {
	t.Helper()
	a := member("a", "g", "1")
	a.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
	bound := member("bound", "g", "1")
	bound.Spec.NodeName = "n1"
	env := newTestEnv(t, defaultArgs(), []*v1alpha1.PodGroup{makePG("ns", "g", 2, time.Time{})}, []*v1.Pod{a, bound})
	env.pl.onPod(bound)
	return env
}
