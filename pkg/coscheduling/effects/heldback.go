package effects

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
)

// HeldBack reports the members held back by PreEnqueue, or refused by PreFilter before their step:
// the status message always, an event once per pod and reason (see gang.Gates), and for the reasons
// that usually pass in a moment (see gang.GateEventOf) only if the pod is still held back for it
// gang.GateEventDelay later, with the message of then. Its own lock guards the gates: no gang state
// is read or changed here.
type HeldBack struct {
	Clock clock.WithDelayedExecution
	// Recorder is the plugin's (its events may be set after the plugin is built).
	Recorder *Recorder
	// Recount says why pod is held back now, for a delayed event of a wait on its group's members or
	// their claims (see gang.Gate.EventMessage); ok false: its PodGroup is gone.
	Recount func(pod *v1.Pod) (reason, msg string, ok bool)

	mu    sync.Mutex
	gates gang.Gates
}

// Hold reports pod held back for reason with msg ("" reason: the message only, no event), and returns
// the status that keeps it out.
func (h *HeldBack) Hold(ctx context.Context, pod *v1.Pod, reason, msg string) *fwk.Status {
	if reason == "" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	h.mu.Lock()
	gate, started := h.gates.Hold(pod.UID, reason, msg)
	h.mu.Unlock()
	if started {
		klog.FromContext(ctx).V(4).Info("Gang member held back", "pod", klog.KObj(pod), "reason", reason)
		if eventType, later := gang.GateEventOf(reason); later {
			h.Clock.AfterFunc(gang.GateEventDelay, func() { h.event(pod, gate.Episode) })
		} else {
			h.Recorder.Pod(pod, eventType, reason, msg)
		}
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// event records the delayed event of a pod still held back in the same episode, with the message of
// now (see gang.Gate.EventMessage). It reads no clock (a fake clock runs it under its own lock).
func (h *HeldBack) event(pod *v1.Pod, episode uint64) {
	h.mu.Lock()
	gate, still := h.gates.Still(pod.UID, episode)
	h.mu.Unlock()
	if !still {
		return
	}
	if msg, ok := gate.EventMessage(func() (string, string, bool) { return h.Recount(pod) }); ok {
		h.Recorder.Pod(pod, v1.EventTypeNormal, gate.Reason, msg)
	}
}

// Release forgets uid's gate: it was let in, bound, or is gone.
func (h *HeldBack) Release(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gates.Release(uid)
}

// Held reports whether uid is held back.
func (h *HeldBack) Held(uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gates.Held(uid)
}

// Len is how many pods are held back.
func (h *HeldBack) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gates.Len()
}
