package effects

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/clock"
)

// Activate moves pods to the scheduler's active queue (PreEnqueue runs again on the way). Only once
// the scheduling queue runs may it be called.
func Activate(logger klog.Logger, h fwk.Handle, pods ...*v1.Pod) {
	if len(pods) == 0 {
		return
	}
	h.Activate(logger, byKey(pods))
}

// ActivateInFlight brings back a pod whose cycle is still in flight: the first activation makes the
// queue take it back as soon as its back-off allows, the second (after delay) takes it out of the
// back-off once its failed cycle has put it there.
func ActivateInFlight(logger klog.Logger, h fwk.Handle, clk clock.WithDelayedExecution, delay time.Duration, pod *v1.Pod) {
	Activate(logger, h, pod)
	clk.AfterFunc(delay, func() { Activate(logger, h, pod) })
}

// ActivateInCycle asks the framework to move pods to the active queue at the end of the scheduling
// cycle whose state this is (nothing when the cycle has no PodsToActivate).
func ActivateInCycle(state fwk.CycleState, pods []*v1.Pod) {
	if len(pods) == 0 {
		return
	}
	data, err := state.Read(framework.PodsToActivateKey)
	if err != nil {
		return
	}
	toActivate, ok := data.(*framework.PodsToActivate)
	if !ok {
		return
	}
	toActivate.Lock()
	defer toActivate.Unlock()
	for k, p := range byKey(pods) {
		toActivate.Map[k] = p
	}
}

// byKey maps pods by namespace/name, as the queue keys them.
func byKey(pods []*v1.Pod) map[string]*v1.Pod {
	m := make(map[string]*v1.Pod, len(pods))
	for _, p := range pods {
		m[p.Namespace+"/"+p.Name] = p
	}
	return m
}

// maxLater bounds the pods Later remembers (past it, the queue's own flush brings the rest back).
const maxLater = 10000

// Later are pods to activate when something they wait for ends (the pods kept off held devices, when
// a reservation ends or a nomination is dropped), at most maxLater. Safe for concurrent use.
type Later struct {
	mu   sync.Mutex
	pods map[types.UID]*v1.Pod
}

// Add remembers pod.
func (l *Later) Add(pod *v1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pods == nil {
		l.pods = map[types.UID]*v1.Pod{}
	}
	if len(l.pods) < maxLater {
		l.pods[pod.UID] = pod
	}
}

// Take returns the pods and forgets them.
func (l *Later) Take() []*v1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*v1.Pod, 0, len(l.pods))
	for _, p := range l.pods {
		out = append(out, p)
	}
	l.pods = nil
	return out
}
