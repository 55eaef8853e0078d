package gangfit

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Which nodes a member may use at all (taints, unschedulable, node selector and affinity), computed once
// per class of members alike in those constraints.

func homogeneous(members []gangMember, e *eligibility) bool {
	key := e.key(members[0].pod)
	for _, m := range members[1:] {
		if !m.req.equal(members[0].req) || e.key(m.pod) != key {
			return false
		}
	}
	return true
}

// eligibility caches, per distinct placement constraints (node selector, required node affinity,
// tolerations), which nodes a member may use. Members of a gang usually share one template, so this is
// one pass over the nodes. Constraints are told apart by a hash of their fields, then compared: no
// encoding per member.
type eligibility struct {
	logger  klog.Logger
	nodes   []freeNode
	classes []eligibilityClass
	// byHash lists the classes whose constraints have a hash.
	byHash map[uint64][]int
	// classOf remembers each member's class, so it is found once per check, not once per use.
	classOf map[*v1.Pod]int
}

// eligibilityClass is one set of placement constraints, as a pod that has them, and its nodes (nil
// until asked for).
type eligibilityClass struct {
	rep *v1.Pod
	ok  []bool
}

func newEligibility(logger klog.Logger, nodes []freeNode) *eligibility {
	return &eligibility{logger: logger, nodes: nodes, byHash: map[uint64][]int{}, classOf: map[*v1.Pod]int{}}
}

// key is the pod's constraint class: pods with equal keys may use the same nodes.
func (e *eligibility) key(pod *v1.Pod) int {
	if c, ok := e.classOf[pod]; ok {
		return c
	}
	h := constraintsHash(pod)
	for _, c := range e.byHash[h] {
		if sameConstraints(e.classes[c].rep, pod) {
			e.classOf[pod] = c
			return c
		}
	}
	c := len(e.classes)
	e.classes = append(e.classes, eligibilityClass{rep: pod})
	e.byHash[h] = append(e.byHash[h], c)
	e.classOf[pod] = c
	return c
}

func nodeAffinityOf(pod *v1.Pod) *v1.NodeAffinity {
	if pod.Spec.Affinity == nil {
		return nil
	}
	return pod.Spec.Affinity.NodeAffinity
}

// sameConstraints reports whether two pods' node selector, required node affinity and tolerations are
// equal (written out: reflection would cost more than the rest of the check per member).
func sameConstraints(a, b *v1.Pod) bool {
	sa, sb := a.Spec.NodeSelector, b.Spec.NodeSelector
	if len(sa) != len(sb) {
		return false
	}
	for k, v := range sa {
		if w, ok := sb[k]; !ok || w != v {
			return false
		}
	}
	ta, tb := a.Spec.Tolerations, b.Spec.Tolerations
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		x, y := &ta[i], &tb[i]
		if x.Key != y.Key || x.Operator != y.Operator || x.Value != y.Value || x.Effect != y.Effect {
			return false
		}
		if (x.TolerationSeconds == nil) != (y.TolerationSeconds == nil) || (x.TolerationSeconds != nil && *x.TolerationSeconds != *y.TolerationSeconds) {
			return false
		}
	}
	na, nb := nodeAffinityOf(a), nodeAffinityOf(b)
	if na == nil || nb == nil {
		return na == nb
	}
	return equality.Semantic.DeepEqual(na, nb)
}

// constraintsHash hashes what sameConstraints compares (the node selector independently of map order,
// the tolerations in order, and whether there is a node affinity): equal constraints hash equal.
func constraintsHash(pod *v1.Pod) uint64 {
	var sel uint64
	for k, v := range pod.Spec.NodeSelector {
		sel ^= fnvAdd(fnvAdd(fnvOffset, k), v)
	}
	h := fnvAdd(fnvOffset, "")
	h ^= sel
	for i := range pod.Spec.Tolerations {
		t := &pod.Spec.Tolerations[i]
		h = fnvAdd(fnvAdd(fnvAdd(fnvAdd(h, t.Key), string(t.Operator)), t.Value), string(t.Effect))
	}
	if nodeAffinityOf(pod) != nil {
		h = fnvAdd(h, "affinity")
	}
	return h
}

// fnvOffset and fnvPrime are FNV-1a's 64-bit parameters (see fnvAdd).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvAdd folds s, then a separator, into an FNV-1a hash.
func fnvAdd(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	h ^= 0xff
	h *= fnvPrime
	return h
}

func (e *eligibility) of(pod *v1.Pod) []bool {
	c := e.key(pod)
	if ok := e.classes[c].ok; ok != nil {
		return ok
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	ok := make([]bool, len(e.nodes))
	for i, f := range e.nodes {
		if f.node.Spec.Unschedulable && !tolerates(e.logger, pod, &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}) {
			continue
		}
		if match, err := required.Match(f.node); err != nil || !match {
			continue
		}
		if _, untolerated := v1helper.FindMatchingUntoleratedTaint(e.logger, f.node.Spec.Taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
			return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
		}, false); untolerated {
			continue
		}
		ok[i] = true
	}
	e.classes[c].ok = ok
	return ok
}

func tolerates(logger klog.Logger, pod *v1.Pod, taint *v1.Taint) bool {
	return v1helper.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, taint, false)
}
