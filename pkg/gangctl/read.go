package gangctl

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// Reads: member pods, events, and what a failed read means.

// eventReaders is how many event lists explain has in flight at once.
const eventReaders = 8

// objectEvents lists the events of the objects uids names in ns: one list per object, selected at
// the apiserver by involvedObject.uid (regarding.uid, for events.k8s.io events), as kubectl describe
// selects an object's events, a few lists at once; each event once, by name. Reading every event of
// the namespace instead costs as much as the namespace has events, whatever the gang's share.
func objectEvents(ctx context.Context, c Clients, ns string, uids []types.UID) ([]v1.Event, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
		out      []v1.Event
		seen     = map[string]bool{}
	)
	slots := make(chan struct{}, eventReaders)
	for _, uid := range uids {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			list, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(uid)).String()})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			for _, e := range list.Items {
				if k := e.Namespace + "/" + e.Name; !seen[k] {
					seen[k] = true
					out = append(out, e)
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	// In the order one list of them all would have (by name), whichever list came back first.
	slices.SortFunc(out, func(a, b v1.Event) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// memberPods lists the member pods of the gang name in ns (every gang's, name empty), by gang
// ("namespace/name").
func memberPods(ctx context.Context, c Clients, ns, name string, lws bool) (map[string][]*v1.Pod, error) {
	sel := v1alpha1.PodGroupLabel
	if name != "" {
		sel += "=" + name
	}
	list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, apiError(err, "pods", "", ns)
	}
	out := map[string][]*v1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		key := p.Namespace + "/" + p.Labels[v1alpha1.PodGroupLabel]
		out[key] = append(out[key], p)
	}
	if !lws {
		return out, nil
	}
	// A LeaderWorkerSet replica's pods carry no PodGroup label: its set's and replica's (podgroup.LWSGroup).
	list, err = c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podgroup.LWSNameLabel})
	if err != nil {
		return nil, apiError(err, "pods", "", ns)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if g, ok := podgroup.Of(p); ok && !podgroup.Labelled(p) && (name == "" || g == name) {
			out[p.Namespace+"/"+g] = append(out[p.Namespace+"/"+g], p)
		}
	}
	return out, nil
}

// madeForLWS reports whether one of pgs is a PodGroup the scheduler made for a LeaderWorkerSet (a
// replica's, or a set's composite): their members are listed by LWS's labels too.
func madeForLWS(pgs ...*v1alpha1.PodGroup) bool {
	for _, pg := range pgs {
		if pg.Labels[podgroup.LabelManagedBy] == podgroup.ManagedBy && pg.Labels[podgroup.LWSNameLabel] != "" {
			return true
		}
	}
	return false
}

// pointers returns pointers to pgs' items.
func pointers(pgs []v1alpha1.PodGroup) []*v1alpha1.PodGroup {
	out := make([]*v1alpha1.PodGroup, len(pgs))
	for i := range pgs {
		out[i] = &pgs[i]
	}
	return out
}

// apiError says what a failed read means for the user: a gang that does not exist, a resource the
// server does not serve, rights the credentials lack.
func apiError(err error, what, name, ns string) error {
	where := where(ns)
	switch {
	case apierrors.IsNotFound(err) && name != "":
		return fmt.Errorf("%s %q not found in %s", what, name, where)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the server does not serve %s (is the PodGroup CRD, podgroups.scheduling.x-k8s.io, installed?): %w", what, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("not allowed to read %s in %s: kubectl gang needs get and list on podgroups.scheduling.x-k8s.io, pods and events: %w", what, where, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the server did not accept the kubeconfig's credentials: %w", err)
	}
	return fmt.Errorf("reading %s in %s: %w", what, where, err)
}

// where says which namespaces ns names: "namespace NAME", or "any namespace".
func where(ns string) string {
	if ns == metav1.NamespaceAll {
		return "any namespace"
	}
	return "namespace " + ns
}
