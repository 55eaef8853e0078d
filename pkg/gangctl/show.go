package gangctl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
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
	var sums []Summary
	var rv string // where a watch starts: no gang twice, no change lost
	root := ""    // the named group's job, whose groups a watch follows
	if name != "" {
		if sums, root, rv, err = o.getNamed(ctx, c, ns, name, watchFlag); err != nil {
			return err
		}
		name = sums[0].Name // an in-tree group's as the scheduler spells it
	} else {
		g, listRV, err := o.readGroups(ctx, c, ns)
		if err != nil {
			return err
		}
		pods, err := groupPods(ctx, c, ns, g)
		if err != nil {
			return err
		}
		sums, rv = summarize(g, pods, o.schedulers), listRV
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
		_, err := fmt.Fprintf(o.out, "No gangs (PodGroups) in %s.\n", where(ns))
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

// getNamed reads the group named name (a PodGroup of ours, else an in-tree group: see inTreeName)
// and, when it is part of a job's tree, the job's other groups: their summaries, the named one's
// first; the job's root ("" for none); and where a watch of ours starts. A watch follows PodGroups of
// ours only.
func (o *options) getNamed(ctx context.Context, c Clients, ns, name string, watchFlag bool) ([]Summary, string, string, error) {
	if !isInTreeSpelling(name) {
		pg, err := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			if !inTree(pg) {
				pods, err := memberPods(ctx, c, ns, name, madeForLWS(pg))
				if err != nil {
					return nil, "", "", err
				}
				return []Summary{Summarize(pg, pods[ns+"/"+name], nil, o.schedulers)}, "", pg.ResourceVersion, nil
			}
			// A group of a job's tree: the tree, from its namespace's PodGroups and pods.
			sums, err := o.treeSummaries(ctx, c, pg, nil)
			if err != nil {
				return nil, "", "", err
			}
			root := sums[0].Root // "" when its tree cannot be resolved: the group alone
			return slices.DeleteFunc(sums, func(s Summary) bool { return s.Name != name && (root == "" || s.Root != root) }), root, pg.ResourceVersion, nil
		case !apierrors.IsNotFound(err):
			return nil, "", "", apiError(err, "PodGroup", name, ns)
		}
	}
	sums, _, _, err := o.inTreeJob(ctx, c, ns, name, notFoundError(name, ns))
	if err != nil {
		return nil, "", "", err
	}
	if watchFlag {
		return nil, "", "", fmt.Errorf("%s is an in-tree group: --watch follows PodGroups of %s only", sums[0].Name, v1alpha1.SchemeGroupVersion.Group)
	}
	root, named := sums[0].Root, sums[0].Name
	return slices.DeleteFunc(sums, func(s Summary) bool { return s.Name != named && (root == "" || s.Root != root) }), root, "", nil
}

// explain prints the whole story of one gang.
func (o *options) explain(ctx context.Context, name string) error {
	c, ns, err := o.connect(o.flags)
	if err != nil {
		return err
	}
	var s Summary
	if isInTreeSpelling(name) {
		s, err = o.explainInTree(ctx, c, ns, name)
	} else if pg, getErr := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{}); getErr == nil {
		s, err = o.explainOurs(ctx, c, pg)
	} else if apierrors.IsNotFound(getErr) {
		s, err = o.explainInTree(ctx, c, ns, name)
	} else {
		err = apiError(getErr, "PodGroup", name, ns)
	}
	if err != nil {
		return err
	}
	if o.output != "" {
		return printData(o.out, o.output, s)
	}
	return printExplain(o.out, s, o.now(), o.style())
}

// explainOurs is the whole story of a PodGroup of ours.
func (o *options) explainOurs(ctx context.Context, c Clients, pg *v1alpha1.PodGroup) (Summary, error) {
	ns, name := pg.Namespace, pg.Name
	linked := inTree(pg)
	podsOf := name
	if linked {
		podsOf = "" // every group's of the namespace, for its tree
	}
	pods, err := memberPods(ctx, c, ns, podsOf, madeForLWS(pg))
	if err != nil {
		return Summary{}, err
	}
	members := pods[ns+"/"+name]
	uids := []types.UID{pg.UID}
	for _, p := range members {
		uids = append(uids, p.UID)
	}
	events, err := objectEvents(ctx, c, ns, uids)
	if err != nil {
		return Summary{}, apiError(err, "events", "", ns)
	}
	s := Summarize(pg, members, events, o.schedulers)
	if linked {
		sums, err := o.treeSummaries(ctx, c, pg, pods)
		if err != nil {
			return Summary{}, err
		}
		events := s.Events
		s = sums[0]
		s.Events = events
	}
	return s, nil
}

// explainInTree is the whole story of an in-tree group (see inTreeName), read with its namespace's
// groups for its tree; its events are the object's and its members'.
func (o *options) explainInTree(ctx context.Context, c Clients, ns, name string) (Summary, error) {
	sums, g, pods, err := o.inTreeJob(ctx, c, ns, name, notFoundError(name, ns))
	if err != nil {
		return Summary{}, err
	}
	s := sums[0]
	uid := types.UID(uidOf(g, ns, s.Name))
	objects := map[string]string{string(uid): s.Name}
	uids := []types.UID{uid}
	for _, p := range pods[podgroup.Key(ns, s.Name)] {
		objects[string(p.UID)] = "Pod/" + p.Name
		uids = append(uids, p.UID)
	}
	events, err := objectEvents(ctx, c, ns, uids)
	if err != nil {
		return Summary{}, apiError(err, "events", "", ns)
	}
	s.Events = gangEvents(events, objects)
	return s, nil
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
