package gangctl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// get and explain: what each command reads, and what it prints.

// get lists the gangs (or the one named), and with watch follows them.
func (o *options) get(ctx context.Context, name string, watchFlag bool) error {
	c, ns, err := o.connect(o.flags)
	if err != nil {
		return err
	}
	if o.allNamespaces {
		ns = metav1.NamespaceAll
	}
	var pgs []v1alpha1.PodGroup
	var rv string // where a watch starts: no gang twice, no change lost
	if name != "" {
		pg, err := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return apiError(err, "PodGroup", name, ns)
		}
		pgs, rv = []v1alpha1.PodGroup{*pg}, pg.ResourceVersion
	} else {
		list, err := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return apiError(err, "PodGroups", "", ns)
		}
		pgs, rv = list.Items, list.ResourceVersion
	}
	var sums []Summary
	root := "" // the named group's job, whose groups a watch follows
	if name != "" && inTree(&pgs[0]) {
		// A group of a job's tree: the tree, from its namespace's PodGroups and pods.
		if sums, err = o.treeSummaries(ctx, c, &pgs[0], nil); err != nil {
			return err
		}
		root = sums[0].Root // "" when its tree cannot be resolved: the group alone
		sums = slices.DeleteFunc(sums, func(s Summary) bool { return s.Name != name && (root == "" || s.Root != root) })
	} else {
		pods, err := memberPods(ctx, c, ns, name, madeForLWS(pointers(pgs)...))
		if err != nil {
			return err
		}
		sums = make([]Summary, 0, len(pgs))
		for i := range pgs {
			sums = append(sums, Summarize(&pgs[i], pods[pgs[i].Namespace+"/"+pgs[i].Name], nil, o.schedulers))
		}
		AttachTrees(pgs, sums)
	}
	slices.SortFunc(sums, func(a, b Summary) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	switch o.output {
	case "json", "yaml":
		if watchFlag {
			// As kubectl get -w -o json: each gang an object of its own, then one per change.
			for _, s := range sums {
				if name != "" && s.Name != name {
					continue // the named one's tree is in its object
				}
				if err := o.printObject(watch.Added, s); err != nil {
					return err
				}
			}
			return o.watch(ctx, c, nil, ns, name, root, sums, rv)
		}
		if name != "" {
			i := slices.IndexFunc(sums, func(s Summary) bool { return s.Name == name })
			return printData(o.out, o.output, sums[i])
		}
		return printData(o.out, o.output, map[string]any{"items": sums})
	}
	if len(sums) == 0 && !watchFlag {
		where := "namespace " + ns
		if ns == metav1.NamespaceAll {
			where = "any namespace"
		}
		_, err := fmt.Fprintf(o.out, "No gangs (PodGroups) in %s.\n", where)
		return err
	}
	cols := &columns{}
	if err := printTable(o.out, cols, sums, o.allNamespaces, o.output == "wide", true, o.now(), o.style()); err != nil {
		return err
	}
	if !watchFlag {
		return nil
	}
	return o.watch(ctx, c, cols, ns, name, root, sums, rv)
}

// explain prints the whole story of one gang.
func (o *options) explain(ctx context.Context, name string) error {
	c, ns, err := o.connect(o.flags)
	if err != nil {
		return err
	}
	pg, err := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return apiError(err, "PodGroup", name, ns)
	}
	linked := inTree(pg)
	podsOf := name
	if linked {
		podsOf = "" // every group's of the namespace, for its tree
	}
	pods, err := memberPods(ctx, c, ns, podsOf, madeForLWS(pg))
	if err != nil {
		return err
	}
	members := pods[ns+"/"+name]
	uids := []types.UID{pg.UID}
	for _, p := range members {
		uids = append(uids, p.UID)
	}
	events, err := objectEvents(ctx, c, ns, uids)
	if err != nil {
		return apiError(err, "events", "", ns)
	}
	s := Summarize(pg, members, events, o.schedulers)
	if linked {
		sums, err := o.treeSummaries(ctx, c, pg, pods)
		if err != nil {
			return err
		}
		events := s.Events
		s = sums[0]
		s.Events = events
	}
	if o.output != "" {
		return printData(o.out, o.output, s)
	}
	return printExplain(o.out, s, o.now(), o.style())
}

// treeSummaries summarizes every PodGroup of pg's namespace, with their trees (AttachTrees), from
// one list of its PodGroups and one of its member pods (pods, when the caller has listed them
// already): pg's summary first, then the others by name. pg stands for itself in the list (the list
// may be newer, or miss it: it was just deleted).
func (o *options) treeSummaries(ctx context.Context, c Clients, pg *v1alpha1.PodGroup, pods map[string][]*v1.Pod) ([]Summary, error) {
	list, err := c.PodGroups.SchedulingV1alpha1().PodGroups(pg.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, apiError(err, "PodGroups", "", pg.Namespace)
	}
	pgs := slices.DeleteFunc(list.Items, func(p v1alpha1.PodGroup) bool { return p.Name == pg.Name })
	pgs = append([]v1alpha1.PodGroup{*pg}, pgs...)
	if pods == nil {
		if pods, err = memberPods(ctx, c, pg.Namespace, "", madeForLWS(pointers(pgs)...)); err != nil {
			return nil, err
		}
	}
	sums := make([]Summary, 0, len(pgs))
	for i := range pgs {
		sums = append(sums, Summarize(&pgs[i], pods[pgs[i].Namespace+"/"+pgs[i].Name], nil, o.schedulers))
	}
	AttachTrees(pgs, sums)
	slices.SortStableFunc(sums[1:], func(a, b Summary) int { return strings.Compare(a.Name, b.Name) })
	return sums, nil
}
