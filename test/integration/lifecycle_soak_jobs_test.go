package integration

// Jobs of several roles in the soak's world: a gang composite (a PodGroup of ours annotated with its
// minGroupCount, see pkg/coscheduling/tree) over two child PodGroups, each a gang of the soak's own
// (every op that picks a gang may pick a child). The watcher adds the tree's invariant to the
// groups': no job has some of its groups bound and fewer than minGroupCount of them whole for longer
// than soakJobGrace, unless the test broke one of its groups since the job was last whole or empty;
// and a job whose composite requires one rack (a third of them) never has its live bound members in
// two racks, whatever the churn does to its groups (deletions, minMember edits, nominations).

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// soakJobGrace is how long a job may have some groups bound and fewer than minGroupCount whole: the
// groups of a ready job are let through Permit together and bind as a flat gang's members do, but a
// bind the fault proxy fails may leave a whole group's sibling to bind again after its back-off.
// Each run logs the longest episode that ended with the job whole.
const soakJobGrace = 5 * time.Second

// soakJob is the test's model of a job of several roles: its composite and its child gangs.
type soakJob struct {
	name     string
	min      int
	children []string
	// since is when the current undisrupted episode of the job short of whole groups with some
	// bound began (zero: none); first is the job as that episode's first snapshot showed it.
	since    time.Time
	first    string
	reported bool
	// disrupted names the op that broke one of the job's groups since the job was last whole or
	// empty ("" for none): the job is not judged until then.
	disrupted string
	// required: the composite requires one rack (topologyPolicy.required) for all its groups;
	// splitReported: the job was seen bound in two racks (reported once).
	required, splitReported bool
}

// createJob models a user submitting a job of two roles: the composite and two child groups of
// 1 to 3 members of 1 or 2 CPUs each (3 for half the second roles), one priority class for the job; sometimes the children
// first (held back, holding nothing, until their parent exists).
func (w *soakWorld) createJob() string {
	if len(w.gangs)+2 > soakMaxGangs {
		return "at the gang limit, so instead: delete gang: " + w.deleteGang()
	}
	j := &soakJob{name: fmt.Sprintf("j%d", w.nextGang), min: 2, required: w.rng.IntN(3) == 0}
	w.nextGang++
	class := ""
	switch w.rng.IntN(4) {
	case 0:
		class = lowPriority
	case 1:
		class = highPriority
	}
	compositeLast := w.rng.IntN(3) == 0
	if !compositeLast {
		w.createComposite(j)
	}
	var parts []string
	for _, role := range []string{"a", "b"} {
		// Members of 3 CPUs (half the jobs' second roles) need a nearly empty node: one role may
		// fit where the other does not, which is what the tree's check and hold are for.
		cpu := 1 + w.rng.IntN(2)
		if role == "b" && w.rng.IntN(2) == 0 {
			cpu = 3
		}
		g := &soakGang{name: j.name + role, minMember: 1 + w.rng.IntN(3), cpu: strconv.Itoa(cpu), class: class, parent: j.name}
		w.createPodGroupOf(g)
		names := w.addMembers(g, g.minMember)
		w.gangs = append(w.gangs, g)
		j.children = append(j.children, g.name)
		parts = append(parts, fmt.Sprintf("%s minMember=%d cpu=%s pods=%v", g.name, g.minMember, g.cpu, names))
	}
	if compositeLast {
		w.createComposite(j)
	}
	w.jobs = append(w.jobs, j)
	return fmt.Sprintf("%s minGroupCount=%d class=%q required=%v compositeLast=%v: %s", j.name, j.min, class, j.required, compositeLast, strings.Join(parts, "; "))
}

// createComposite creates j's composite PodGroup: no pods of its own, its minGroupCount annotated.
func (w *soakWorld) createComposite(j *soakJob) {
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(),
		"kind":       "PodGroup",
		"metadata":   map[string]any{"name": j.name, "namespace": w.ns, "annotations": map[string]any{tree.AnnotationMinGroupCount: strconv.Itoa(j.min)}},
		"spec":       map[string]any{"minMember": int64(1)},
	}}
	if j.required {
		pg.Object["spec"].(map[string]any)["topologyPolicy"] = map[string]any{"required": rackLabel}
	}
	if _, err := w.dyn.Resource(podGroupGVR).Namespace(w.ns).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		w.fatalf("creating composite PodGroup %s: %v", j.name, err)
	}
}

// deleteJob models a user deleting a whole job (a group of it picked for deletion takes the job):
// its groups' PodGroups and pods, then its composite.
func (w *soakWorld) deleteJob(j *soakJob) string {
	var pods []string
	for _, name := range j.children {
		w.disrupt(name, "delete job")
		w.deletePodGroup(name)
		for _, p := range w.listGroup(name) {
			w.deletePod(p.Name, true)
			pods = append(pods, p.Name)
		}
		w.gangs = slices.DeleteFunc(w.gangs, func(x *soakGang) bool { return x.name == name })
	}
	w.deletePodGroup(j.name)
	w.jobs = slices.DeleteFunc(w.jobs, func(x *soakJob) bool { return x == j })
	return fmt.Sprintf("job %s (%d pods)", j.name, len(pods))
}

func (w *soakWorld) jobByName(name string) *soakJob {
	for _, j := range w.jobs {
		if j.name == name {
			return j
		}
	}
	return nil
}

// disruptJob marks the job of a group the test broke (see disrupt). Callers hold mu.
func (w *soakWorld) disruptJob(group, why string) {
	if g := w.gangByName(group); g != nil && g.parent != "" {
		if j := w.jobByName(g.parent); j != nil {
			j.disrupted, j.since, j.reported = why, time.Time{}, false
		}
	}
}

// observeJobs judges each job on a snapshot (see soakJob). Callers hold mu.
func (w *soakWorld) observeJobs(views map[string]*soakGroupView, now time.Time) {
	for _, j := range w.jobs {
		whole, bound := 0, false
		var parts []string
		for _, name := range j.children {
			v := views[name]
			if v == nil || v.minMember == 0 {
				parts = append(parts, name+": no PodGroup")
				continue
			}
			n := v.whole()
			if n >= v.minMember {
				whole++
			}
			bound = bound || v.liveBound() > 0
			parts = append(parts, fmt.Sprintf("%s %d/%d", name, n, v.minMember))
		}
		desc := strings.Join(parts, ", ")
		w.checkJobRack(j, views)
		switch {
		case whole >= j.min || !bound:
			if !j.since.IsZero() {
				d := now.Sub(j.since)
				if !j.reported && whole >= j.min {
					w.longestJob = max(w.longestJob, d)
				}
				if j.reported || d > time.Second {
					w.t.Logf("%s watcher: job %s is whole or empty again after %v short: %s", w.elapsed(), j.name, d.Round(100*time.Millisecond), desc)
				}
			}
			j.since, j.reported, j.disrupted = time.Time{}, false, ""
		case j.disrupted != "":
		case j.since.IsZero():
			j.since, j.first = now, desc
		case !j.reported && now.Sub(j.since) > soakJobGrace:
			j.reported = true
			w.violations++
			w.failf("%s VIOLATION: job %s has %d of minGroupCount %d groups whole and some bound, for %v without a disruption by the test: now %s; first seen at +%.1fs: %s (replay with SOAK_SEED=%d)",
				w.elapsed(), j.name, whole, j.min, now.Sub(j.since).Round(100*time.Millisecond), desc, j.since.Sub(w.start).Seconds(), j.first, w.seed)
		}
	}
}

// checkJobRack reports a job whose composite requires one rack with live bound members in two: a
// required domain is never split, whichever of its groups' members the churn deleted, edited or
// nominated. Callers hold mu.
func (w *soakWorld) checkJobRack(j *soakJob, views map[string]*soakGroupView) {
	if !j.required || j.splitReported {
		return
	}
	racks := map[string][]string{}
	for _, name := range j.children {
		if v := views[name]; v != nil {
			w.addRacks(racks, v)
		}
	}
	if len(racks) > 1 {
		j.splitReported = true
		w.violations++
		w.failf("%s VIOLATION: job %s requires one rack and is bound in %d: %v (replay with SOAK_SEED=%d)", w.elapsed(), j.name, len(racks), racks, w.seed)
	}
}
