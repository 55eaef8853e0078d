package gangctl

import (
	"context"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// Watching: get --watch prints each change of the groups it shows.

// printObject writes one gang of a -o json|yaml watch: the gang, or with --output-watch-events the
// change's type and the gang; YAML documents after the first are preceded by "---".
func (o *options) printObject(t watch.EventType, s Summary) error {
	var v any = s
	if o.watchEvents {
		v = struct {
			Type   watch.EventType `json:"type"`
			Object Summary         `json:"object"`
		}{t, s}
	}
	if o.output == "yaml" && o.printed > 0 {
		if _, err := io.WriteString(o.out, "---\n"); err != nil {
			return err
		}
	}
	o.printed++
	return printData(o.out, o.output, v)
}

// watch prints a gang's line (its object, with -o json|yaml) again whenever its PodGroup changes,
// until ctx ends. With root (the job of the named group, whose groups are sums), the line of each
// group of the job that changes.
func (o *options) watch(ctx context.Context, c Clients, cols *columns, ns, name, root string, sums []Summary, resourceVersion string) error {
	opts := metav1.ListOptions{ResourceVersion: resourceVersion}
	job := map[string]bool{name: true}
	for _, s := range sums {
		job[s.Name] = true
	}
	if name != "" && root == "" {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	w, err := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).Watch(ctx, opts)
	if err != nil {
		return apiError(err, "PodGroups", name, ns)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			pg, isPG := ev.Object.(*v1alpha1.PodGroup)
			if !isPG || (name != "" && root == "" && pg.Name != name) || (ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted) {
				continue
			}
			if root != "" && !job[pg.Name] && !inTree(pg) {
				continue // no group of the job's, nor one that could join it
			}
			var s Summary
			if inTree(pg) && ev.Type != watch.Deleted {
				// Its line depends on its job's other groups: one list of them and of their pods.
				sums, err := o.treeSummaries(ctx, c, pg, nil)
				if err != nil {
					return err
				}
				s = sums[0]
			} else {
				pods, err := memberPods(ctx, c, pg.Namespace, pg.Name, madeForLWS(pg))
				if err != nil {
					return err
				}
				s = Summarize(pg, pods[pg.Namespace+"/"+pg.Name], nil, o.schedulers)
			}
			if root != "" {
				// The job's groups: those it had, and those that join it.
				if s.Root == root {
					job[s.Name] = true
				}
				if !job[s.Name] {
					continue
				}
			}
			if ev.Type == watch.Deleted {
				s.Short = "deleted"
			}
			if o.output == "json" || o.output == "yaml" {
				if err := o.printObject(ev.Type, s); err != nil {
					return err
				}
				continue
			}
			if err := printTable(o.out, cols, []Summary{s}, o.allNamespaces, o.output == "wide", false, o.now(), o.style()); err != nil {
				return err
			}
		}
	}
}
