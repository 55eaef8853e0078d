package gangctl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// Reading the in-tree groups: only where discovery says the apiserver serves them, asked once per
// command and only when a command needs them (a list, or a name no PodGroup of ours has). Where they
// are not served, nothing of them is read and nothing is said.

// inTreeAPIs says which in-tree APIs the apiserver serves.
type inTreeAPIs struct{ podGroups, composites bool }

// inTreeServed asks discovery, once per command, which in-tree APIs are served. Where the PodGroups
// are, their members are read as the scheduler reads them (podgroup.SetInTreeRead: a pod's
// spec.schedulingGroup names its group, a label of ours winning over it).
func (o *options) inTreeServed(c Clients) (inTreeAPIs, error) {
	if o.inTree != nil {
		return *o.inTree, nil
	}
	var apis inTreeAPIs
	var err error
	d := c.Kube.Discovery()
	if apis.podGroups, err = served(d, podgroup.InTreeGroupVersion.String(), "podgroups"); err != nil {
		return apis, err
	}
	if apis.composites, err = served(d, schedulingv1alpha3.SchemeGroupVersion.String(), "compositepodgroups"); err != nil {
		return apis, err
	}
	if apis.podGroups {
		podgroup.SetInTreeRead(true)
	}
	o.inTree = &apis
	return apis, nil
}

// served reports whether discovery lists resource in the group version gv (not found: not served).
func served(d discovery.DiscoveryInterface, gv, resource string) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the apiserver whether it serves %s: %w", gv, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }), nil
}

// readGroups lists the groups of ns (every namespace's, for metav1.NamespaceAll): the PodGroups of
// ours, and the in-tree PodGroups and CompositePodGroups where they are served. rv is the list of
// ours' resourceVersion (where a watch of them starts). The credentials may not read the in-tree
// groups: they are left out, and said so on errOut.
func (o *options) readGroups(ctx context.Context, c Clients, ns string) (groups, string, error) {
	list, err := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return groups{}, "", apiError(err, "PodGroups", "", ns)
	}
	g := groups{pgs: list.Items}
	apis, err := o.inTreeServed(c)
	if err != nil {
		return groups{}, "", err
	}
	if apis.podGroups {
		in, err := c.Kube.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err := o.inTreeError(err, "podgroups.scheduling.k8s.io", ns); err != nil {
			return groups{}, "", err
		}
		if in != nil {
			g.fromInTree(in.Items)
		}
	}
	if apis.composites {
		in, err := c.Kube.SchedulingV1alpha3().CompositePodGroups(ns).List(ctx, metav1.ListOptions{})
		if err := o.inTreeError(err, "compositepodgroups.scheduling.k8s.io", ns); err != nil {
			return groups{}, "", err
		}
		if in != nil {
			g.composites = in.Items
		}
	}
	return g, list.ResourceVersion, nil
}

// inTreeError is what a failed list of in-tree groups means: nothing, when the credentials may not
// read them (they are left out, and errOut says so), else the error.
func (o *options) inTreeError(err error, resource, ns string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		fmt.Fprintf(o.errOut, "Warning: not allowed to list %s in %s: they are not shown\n", resource, where(ns))
		return nil
	}
	return apiError(err, resource, "", ns)
}

// groupPods lists the member pods of g's groups in ns, by podgroup.Key: PodGroups of ours by their
// label (and LeaderWorkerSet's, see memberPods), and where g has in-tree groups every pod of their
// namespaces, kept when spec.schedulingGroup makes it a member of an in-tree group (podgroup.Of).
func groupPods(ctx context.Context, c Clients, ns string, g groups) (map[string][]*v1.Pod, error) {
	pods, err := memberPods(ctx, c, ns, "", madeForLWS(pointers(g.pgs)...))
	if err != nil || !g.hasInTree() {
		return pods, err
	}
	var namespaces []string
	for _, n := range g.nodes() {
		if n.InTree() && !slices.Contains(namespaces, n.Namespace) {
			namespaces = append(namespaces, n.Namespace)
		}
	}
	if ns != metav1.NamespaceAll {
		namespaces = []string{ns}
	}
	for _, in := range namespaces {
		list, err := c.Kube.CoreV1().Pods(in).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, apiError(err, "pods", "", in)
		}
		for i := range list.Items {
			p := &list.Items[i]
			if name, ok := podgroup.Of(p); ok {
				if _, inTree := podgroup.InTreeName(name); inTree {
					pods[podgroup.Key(p.Namespace, name)] = append(pods[podgroup.Key(p.Namespace, name)], p)
				}
			}
		}
	}
	return pods, nil
}

// inTreeName is the name an in-tree group goes by among g (podgroups.scheduling.k8s.io/NAME or
// compositepodgroups.scheduling.k8s.io/NAME) for the name a user gave: that spelling itself, or a
// bare name (the PodGroup's, then the CompositePodGroup's). False: none of g.
func inTreeName(g groups, ns, name string) (string, bool) {
	var want []string
	if strings.Contains(name, "/") {
		want = []string{name}
	} else {
		want = []string{podgroup.InTreePrefix + name, tree.InTreeCompositePrefix + name}
	}
	for _, w := range want {
		for _, n := range g.nodes() {
			if n.InTree() && n.Namespace == ns && n.Name == w {
				return w, true
			}
		}
	}
	return "", false
}

// isInTreeSpelling reports whether name is spelled as an in-tree group's (no PodGroup of ours has a
// "/" in its name).
func isInTreeSpelling(name string) bool {
	return strings.HasPrefix(name, podgroup.InTreePrefix) || strings.HasPrefix(name, tree.InTreeCompositePrefix)
}

// inTreeJob reads the in-tree group name (any spelling inTreeName takes) of ns with its namespace's
// groups and their members, and returns their summaries with the named one's first; notFound is the
// error to give when no in-tree group has the name (or they are not served).
func (o *options) inTreeJob(ctx context.Context, c Clients, ns, name string, notFound error) ([]Summary, groups, map[string][]*v1.Pod, error) {
	apis, err := o.inTreeServed(c)
	if err != nil {
		return nil, groups{}, nil, err
	}
	if !apis.podGroups && !apis.composites {
		return nil, groups{}, nil, notFound
	}
	g, _, err := o.readGroups(ctx, c, ns)
	if err != nil {
		return nil, groups{}, nil, err
	}
	full, ok := inTreeName(g, ns, name)
	if !ok {
		return nil, groups{}, nil, notFound
	}
	pods, err := groupPods(ctx, c, ns, g)
	if err != nil {
		return nil, groups{}, nil, err
	}
	sums := summarize(g, pods, o.schedulers)
	i := slices.IndexFunc(sums, func(s Summary) bool { return s.Name == full })
	sums[0], sums[i] = sums[i], sums[0]
	return sums, g, pods, nil
}

// notFoundError is the error of a group of no API: as for a PodGroup of ours.
func notFoundError(name, ns string) error {
	return apiError(apierrors.NewNotFound(v1alpha1.Resource("podgroups"), name), "PodGroup", name, ns)
}

// uidOf is the UID of the group named name among g, the in-tree spelling for in-tree ones.
func uidOf(g groups, ns, name string) string {
	for _, n := range g.nodes() {
		if n.Namespace == ns && n.Name == name {
			return string(n.UID)
		}
	}
	return ""
}
