package tree

import (
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
)

// FromComposite is the node of an in-tree CompositePodGroup (scheduling.k8s.io/v1alpha3): a gang
// composite with its minGroupCount, or a basic one; its parent as its spec names it.
func FromComposite(c *schedulingv1alpha3.CompositePodGroup) Node {
	n := Node{Namespace: c.Namespace, Name: InTreeCompositePrefix + c.Name, UID: c.UID, Composite: true, Min: 1}
	if g := c.Spec.SchedulingPolicy.Gang; g != nil {
		n.Gang, n.Min = true, max(int(g.MinGroupCount), 1)
	}
	if sc := c.Spec.SchedulingConstraints; sc != nil && len(sc.Topology) > 0 {
		n.Domain = sc.Topology[0].Key
	}
	if p := c.Spec.ParentCompositePodGroupName; p != nil && *p != "" {
		n.Parent = InTreeCompositePrefix + *p
	}
	return n
}

// InTreeParent is the parent an in-tree PodGroup names (spec.parentCompositePodGroupName), as the
// plugin knows it ("" for none).
func InTreeParent(name *string) string {
	if name == nil || *name == "" {
		return ""
	}
	return InTreeCompositePrefix + *name
}
