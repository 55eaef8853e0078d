package gangctl

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// In-tree groups (scheduling.k8s.io), where the apiserver serves them: PodGroups of v1beta1, read as
// the scheduler reads them (podgroup.FromInTree: named podgroups.scheduling.k8s.io/NAME, their parent
// in tree.AnnotationParent), and CompositePodGroups of v1alpha3 (tree.FromComposite: named
// compositepodgroups.scheduling.k8s.io/NAME). Both join the trees of package tree as the scheduler's
// index holds them. Their API carries none of our status: an in-tree PodGroup's phase and reason are
// derived from its members (Summary.Derived), and its own conditions are shown as they are
// (Summary.Upstream).

// The kinds of Summary.Kind.
const (
	KindPodGroup          = "PodGroup"
	KindCompositePodGroup = "CompositePodGroup"
)

// compositeInitiallyScheduled is a CompositePodGroup's condition type (the API names it in its
// documentation only; status.ConditionCompositeInitiallyScheduled).
const compositeInitiallyScheduled = "CompositePodGroupInitiallyScheduled"

// groups are the groups kubectl gang read of a namespace (or of all): PodGroups of ours and in-tree
// PodGroups as the scheduler reads them (podgroup.FromInTree), and in-tree CompositePodGroups.
type groups struct {
	pgs        []v1alpha1.PodGroup
	composites []schedulingv1alpha3.CompositePodGroup
}

// fromInTree adds in-tree PodGroups as the scheduler reads them.
func (g *groups) fromInTree(in []schedulingv1beta1.PodGroup) {
	for i := range in {
		g.pgs = append(g.pgs, *podgroup.FromInTree(&in[i]))
	}
}

// hasInTree reports whether some group was read from the in-tree API (its members are found by
// spec.schedulingGroup, not by a label).
func (g groups) hasInTree() bool {
	return len(g.composites) > 0 || slices.ContainsFunc(g.pgs, func(pg v1alpha1.PodGroup) bool { return podgroup.IsInTree(&pg) })
}

// nodes are the groups' nodes, as the scheduler's index holds them.
func (g groups) nodes() []tree.Node {
	out := make([]tree.Node, 0, len(g.pgs)+len(g.composites))
	for i := range g.pgs {
		out = append(out, treeNode(&g.pgs[i]))
	}
	for i := range g.composites {
		out = append(out, tree.FromComposite(&g.composites[i]))
	}
	return out
}

// summarize summarizes every group (a PodGroup from its members in pods, by podgroup.Key) with the
// trees they make (see attachTrees), in the order of g. Pure.
func summarize(g groups, pods map[string][]*v1.Pod, ours []string) []Summary {
	sums := make([]Summary, 0, len(g.pgs)+len(g.composites))
	for i := range g.pgs {
		pg := &g.pgs[i]
		sums = append(sums, Summarize(pg, pods[podgroup.Key(pg.Namespace, pg.Name)], nil, ours))
	}
	for i := range g.composites {
		sums = append(sums, CompositeSummary(&g.composites[i], ours))
	}
	attachTrees(g.nodes(), sums)
	return sums
}

// CompositeSummary is an in-tree CompositePodGroup's summary before its tree is attached (which gives
// it its numbers): a group with no members of its own, its conditions as they are.
func CompositeSummary(c *schedulingv1alpha3.CompositePodGroup, ours []string) Summary {
	if len(ours) == 0 {
		ours = []string{DefaultSchedulerName}
	}
	n := tree.FromComposite(c)
	s := Summary{Namespace: c.Namespace, Name: n.Name, APIVersion: schedulingv1alpha3.SchemeGroupVersion.String(), Kind: KindCompositePodGroup,
		Phase: v1alpha1.PodGroupPending, MinMember: 1, Created: c.CreationTimestamp, Schedulers: ours,
		Upstream: upstream(c.Status.Conditions)}
	s.WaitingFor, s.Short = waitingFor(s)
	if cond := meta.FindStatusCondition(c.Status.Conditions, compositeInitiallyScheduled); cond != nil {
		s.Reason, s.Message, s.Since = cond.Reason, cond.Message, &cond.LastTransitionTime
	}
	return s
}

// UpstreamCondition is one of an in-tree object's own conditions, as shown.
type UpstreamCondition struct {
	Type    string      `json:"type"`
	Status  string      `json:"status"`
	Reason  string      `json:"reason"`
	Message string      `json:"message,omitempty"`
	Since   metav1.Time `json:"since"`
}

func upstream(conds []metav1.Condition) []UpstreamCondition {
	var out []UpstreamCondition
	for _, c := range conds {
		out = append(out, UpstreamCondition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime})
	}
	return out
}

// unplaced are our reasons the scheduler puts first in the message of an in-tree PodGroup's
// PodGroupInitiallyScheduled condition when it turns it False (Unschedulable) after an attempt.
var unplaced = []string{podgroup.ReasonGangInfeasible, podgroup.ReasonGangRejected, podgroup.ReasonGangTimedOut}

// deriveInTree gives the summary of an in-tree PodGroup (its members counted) what our status would
// say: the phase by the status writer's rule (podgroup.Phase) over its members of ours, and the
// reason from its members (placed, some bound, too few) or else from its PodGroupInitiallyScheduled
// condition (False after an attempt that placed nothing, the message starting with our reason).
// What the scheduler keeps in memory of such a group (members waiting at Permit, the shortfall's
// numbers, a reservation, a back-off's end, the domain chosen) is not known. Pure.
func deriveInTree(s *Summary, pg *v1alpha1.PodGroup, pods []*v1.Pod) {
	s.Derived = true
	s.Upstream = upstream(pg.Status.Conditions)
	var c podgroup.Counts
	var mine []*v1.Pod
	for _, p := range pods {
		if !slices.Contains(s.Schedulers, schedulerOf(p)) {
			continue
		}
		mine = append(mine, p)
		if p.Status.Phase == v1.PodFailed {
			c.Failed++
		}
		if !podgroup.IsLive(p) {
			continue
		}
		c.Live++
		if p.Spec.NodeName != "" {
			c.Scheduled++
			if p.Status.Phase == v1.PodRunning {
				c.Running++
			}
		}
	}
	if len(mine) > 0 {
		c.Credit = int32(podgroup.RunCredit(mine, mine[0].Spec.SchedulerName, pg.CreationTimestamp.Time))
	}
	s.Phase = podgroup.Phase(c, s.MinMember)
	s.Reason, s.Message, s.Since = inTreeReason(c, s.MinMember, pg.Status.Conditions)
}

// inTreeReason is the reason (one of ours) an in-tree PodGroup's members and conditions show, with
// its message and, when a condition says it, since when; none when they show none.
func inTreeReason(c podgroup.Counts, minMember int32, conds []metav1.Condition) (string, string, *metav1.Time) {
	switch {
	case c.Scheduled+c.Credit >= minMember:
		return podgroup.ReasonQuorumReached, fmt.Sprintf("%d of minMember %d live members are bound, %d succeeded", c.Scheduled, minMember, c.Credit), nil
	case c.Scheduled > 0:
		return podgroup.ReasonBelowQuorum, fmt.Sprintf("%d of minMember %d live members are bound", c.Scheduled, minMember), nil
	case c.Live+c.Credit < minMember:
		return podgroup.ReasonWaitingForMembers, fmt.Sprintf("%d of minMember %d live pods exist", c.Live, minMember), nil
	}
	if cond := meta.FindStatusCondition(conds, schedulingv1beta1.PodGroupInitiallyScheduled); cond != nil && cond.Status == metav1.ConditionFalse &&
		cond.Reason == schedulingv1beta1.PodGroupReasonUnschedulable {
		if reason, msg, ok := strings.Cut(cond.Message, ": "); ok && slices.Contains(unplaced, reason) {
			return reason, msg, &cond.LastTransitionTime
		}
	}
	return "", "", nil
}
