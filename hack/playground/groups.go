package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
	"github.com/custom-scheduler/custom-scheduler/pkg/gangctl"
	"github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned"
)

// --example=NAME: one job of several roles (a gang composite over PodGroups, docs/coscheduling/
// gang-groups.md) from examples/gang-groups, created in namespace demo in place of the sample
// workloads, so that the nodes hold it alone and what binds is what the example says: its pods are
// sized for the playground's default 4 nodes of 8 CPU.
const groupExamplesDir = "examples/gang-groups"

// groupExample is one of examples/gang-groups.
type groupExample struct {
	file string // under groupExamplesDir
	// root is the job's composite: the playground waits until it is whole and prints its tree.
	root string
	// expect says what the example shows (printed with the tree).
	expect string
	// kubectl are more commands to show (after "kubectl -n demo").
	kubectl []string
	// made: the scheduler makes the job's PodGroups (a LeaderWorkerSet's); the playground lists them.
	// kubectl gang counts a group's members by the PodGroup label, which such pods do not carry, so
	// its tree is not printed for them (it would show every group empty).
	made bool
}

var groupExamples = map[string]groupExample{
	"disaggregated": {
		file: "disaggregated.yaml", root: "serve",
		expect:  "serve needs router (1), prefill (2) and decode (4) whole together: all seven pods bound at once",
		kubectl: []string{"get pg serve router prefill decode", "get pods -l app=serve -o wide"},
	},
	"lws": {
		file: "lws-replicas.yaml", root: "llm",
		expect: "the scheduler made the PodGroups llm-0..llm-2 (one per replica, from the LWS labels) and the " +
			"composite llm (min-group-count 2); room for 2 replicas of 3: two bound whole, the third nothing",
		kubectl: []string{"get pg -l " + podgroup.LabelManagedBy + "=" + podgroup.ManagedBy,
			"get pods -l " + podgroup.LWSNameLabel + "=llm -o wide"},
		made: true,
	},
}

// groupExampleNames lists the names --example takes.
func groupExampleNames() string {
	names := make([]string, 0, len(groupExamples))
	for n := range groupExamples {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// compositeWhole reports whether the gang composite root in ns is whole: at least its min-group-count
// of the PodGroups under it (one level, as in examples/gang-groups) have minMember live members bound.
// It also returns the numbers ("2 of min-group-count 2 groups whole: llm-0 3/3, llm-1 3/3, llm-2 0/3").
func compositeWhole(ctx context.Context, clientset kubernetes.Interface, pgClient versioned.Interface, ns, root string) (bool, string, error) {
	pgs, err := pgClient.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	return wholeOf(pgs.Items, pods.Items, root)
}

// wholeOf is compositeWhole on lists already read.
func wholeOf(pgs []v1alpha1.PodGroup, pods []corev1.Pod, root string) (bool, string, error) {
	bound := map[string]int{}
	for i := range pods {
		p := &pods[i]
		if g, ok := podgroup.Of(p); ok && p.Spec.NodeName != "" && podgroup.IsLive(p) {
			bound[g]++
		}
	}
	var (
		minCount = -1
		children []string
		whole    int
	)
	minMember := map[string]int{}
	for i := range pgs {
		pg := &pgs[i]
		if pg.Name == root {
			n, err := strconv.Atoi(pg.Annotations[tree.AnnotationMinGroupCount])
			if err != nil {
				return false, "", fmt.Errorf("PodGroup %s is no gang composite: %s is %q", root, tree.AnnotationMinGroupCount, pg.Annotations[tree.AnnotationMinGroupCount])
			}
			minCount = n
		}
		if pg.Annotations[tree.AnnotationParent] == root {
			children = append(children, pg.Name)
			minMember[pg.Name] = podgroup.MinMember(pg)
		}
	}
	if minCount < 0 {
		return false, fmt.Sprintf("no PodGroup %s yet", root), nil
	}
	slices.Sort(children)
	parts := make([]string, 0, len(children))
	for _, c := range children {
		if bound[c] >= minMember[c] {
			whole++
		}
		parts = append(parts, fmt.Sprintf("%s %d/%d", c, bound[c], minMember[c]))
	}
	msg := fmt.Sprintf("%d of min-group-count %d groups whole", whole, minCount)
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, ", ")
	}
	return whole >= minCount, msg, nil
}

// printGangTree prints `kubectl gang get ROOT -n ns` (the job's tree), run in process on the
// playground's clients.
func printGangTree(ctx context.Context, out io.Writer, clientset kubernetes.Interface, pgClient versioned.Interface, ns, root string) error {
	conn := func(*genericclioptions.ConfigFlags) (gangctl.Clients, string, error) {
		return gangctl.Clients{Kube: clientset, PodGroups: pgClient}, ns, nil
	}
	cmd := gangctl.NewCommand(out, time.Now, conn)
	cmd.SetArgs([]string{"get", root, "--color=never"})
	return cmd.ExecuteContext(ctx)
}

// printMadeGroups lists the PodGroups the scheduler made in ns (for LeaderWorkerSets): each with its
// minMember or min-group-count, its parent and its owner.
func printMadeGroups(ctx context.Context, out io.Writer, pgClient versioned.Interface, ns string) error {
	list, err := pgClient.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{LabelSelector: podgroup.LabelManagedBy + "=" + podgroup.ManagedBy})
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PODGROUP (made by the scheduler)\tMIN\tPARENT\tOWNER")
	for _, pg := range list.Items {
		quorum := fmt.Sprintf("minMember %d", pg.Spec.MinMember)
		if c, ok := pg.Annotations[tree.AnnotationMinGroupCount]; ok {
			quorum = "min-group-count " + c
		}
		owner := "-"
		if ref := metav1.GetControllerOf(&pg); ref != nil {
			owner = ref.Kind + " " + ref.Name
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", pg.Name, quorum, orDash(pg.Annotations[tree.AnnotationParent]), owner)
	}
	return w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// groupExampleFiles are the files --example=name creates: namespace demo, then the example.
func groupExampleFiles(name string) []string {
	return []string{filepath.Join("examples", "playground", "00-namespace.yaml"), filepath.Join(groupExamplesDir, groupExamples[name].file)}
}
