package gang

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// What a member's failed cycle says of the placement plan that narrowed it (see the plugin's
// planMissed): whether it missed the plan, and why each offered node was rejected.

// MissedPlan reports whether the cycle failed on the plan's nodes: the Filter plugins rejected one of
// the offered nodes, or the offered nodes were never filtered because they are gone or another
// plugin's PreFilterResult excludes them (the framework then gives the absent nodes a status of no
// plugin). A cycle that another plugin's PreFilter rejected (every node has that plugin's status) is
// no miss of the plan. Without statuses (nil) it cannot tell, and takes the cycle as a miss.
func MissedPlan(offered []string, m fwk.NodeToStatusReader) bool {
	if m == nil {
		return true
	}
	absent := m.Get("")
	if absent == nil || absent.Plugin() == "" {
		return true
	}
	for _, name := range offered {
		if m.Get(name) != absent {
			return true
		}
	}
	return false
}

// MissedPlanMessage is the status of member pod of the group of key that fitted none of the nodes
// its plan offered (why each was rejected: RejectedNodes): it is retried at once without the plan.
func MissedPlanMessage(key string, pod *v1.Pod, offered []string, m fwk.NodeToStatusReader) string {
	return fmt.Sprintf("PodGroup %s: member %s fits none of its planned nodes (%s); it is retried at once without the plan", key, klog.KObj(pod), RejectedNodes(offered, m))
}

// RejectedNodes names the offered nodes with the first reason each was rejected for, at most a few.
func RejectedNodes(offered []string, m fwk.NodeToStatusReader) string {
	var parts []string
	for _, name := range offered {
		reason := "rejected"
		if m != nil {
			if s := m.Get(name); s != nil && len(s.Reasons()) > 0 {
				reason = s.Reasons()[0]
			}
		}
		parts = append(parts, name+": "+reason)
	}
	if len(parts) > 4 {
		parts = append(parts[:4], fmt.Sprintf("and %d more", len(parts)-4))
	}
	return strings.Join(parts, "; ")
}
