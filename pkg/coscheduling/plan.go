package coscheduling

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/effects"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/metrics"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// The placement plan (see gangfit.PlanPlacement): made with the whole-gang check of an attempt's first
// member, kept in the gang's state for the attempt, and used by each member's PreFilter to offer it a
// few planned nodes. Reserve counts the members the plan placed; the plan ends with the attempt (quorum
// or failure). A member none of whose offered nodes fits (the cluster changed since the check, or a
// constraint the plan does not model) falls back: the plan is dropped for the attempt and the member
// is retried at once without it (see planMissed).

// planRetryDelay is when a member whose planned nodes did not fit is brought back from the back-off
// queue, once its failed cycle has put it there.
const planRetryDelay = 20 * time.Millisecond

// The outcome labels of metrics.PlacementPlanMembers.
const (
	planPlaced   = "placed"
	planFallback = "fallback"
)

// planMissed is PostFilter for a member whose cycle the plan narrowed and that fitted none of the
// offered nodes: the plan is dropped, and no new one is made, until the attempt ends (it was made on a
// cluster that has changed, or misses a constraint), and the member is retried at once without it (on
// every node, or its gang's domain). It does not count as a member that found no node.
func (pl *Coscheduling) planMissed(ctx context.Context, pod *v1.Pod, offered []string, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	name, _ := podgroup.Of(pod)
	key := podgroup.Key(pod.Namespace, name)
	pl.mu.Lock()
	pl.gangs.MissPlan(key)
	pl.mu.Unlock()
	metrics.PlacementPlanMembers.WithLabelValues(pl.profile, planFallback).Inc()
	msg := gang.MissedPlanMessage(key, pod, offered, m)
	klog.FromContext(ctx).V(3).Info("Placement plan missed; falling back to a full cycle", "pod", klog.KObj(pod), "podGroup", key, "reason", msg)
	if pl.running.Load() {
		effects.ActivateInFlight(klog.FromContext(pl.ctx), pl.handle, pl.clock, planRetryDelay, pod)
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, msg)
}
