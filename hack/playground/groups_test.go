package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// exampleObjects are the objects of one file of examples/gang-groups, decoded, with the pods they
// stand for: bare pods as written, a Deployment's replicas copies of its template.
type exampleObjects struct {
	podGroups    []*v1alpha1.PodGroup
	pods         []*corev1.Pod
	statefulSets []*appsv1.StatefulSet
}

func readExample(t *testing.T, path string) exampleObjects {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out exampleObjects
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if meta.Kind == "" {
			continue // comments only
		}
		strict := func(into any) {
			if err := yaml.UnmarshalStrict(doc, into); err != nil {
				t.Fatalf("%s: a %s does not decode strictly: %v", path, meta.Kind, err)
			}
		}
		var ns string
		switch meta.Kind {
		case "PodGroup":
			pg := &v1alpha1.PodGroup{}
			strict(pg)
			out.podGroups, ns = append(out.podGroups, pg), pg.Namespace
		case "Pod":
			pod := &corev1.Pod{}
			strict(pod)
			out.pods, ns = append(out.pods, pod), pod.Namespace
		case "Deployment":
			d := &appsv1.Deployment{}
			strict(d)
			ns = d.Namespace
			sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("%s: Deployment %s's selector does not select its template (%v)", path, d.Name, err)
			}
			for i := range int(*d.Spec.Replicas) {
				out.pods = append(out.pods, &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: fmt.Sprintf("%s-%d", d.Name, i),
						Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations},
					Spec: d.Spec.Template.Spec,
				})
			}
		case "StatefulSet":
			s := &appsv1.StatefulSet{}
			strict(s)
			out.statefulSets, ns = append(out.statefulSets, s), s.Namespace
		default:
			t.Fatalf("%s: unexpected kind %s", path, meta.Kind)
		}
		if ns != "demo" {
			t.Errorf("%s: a %s in namespace %q, want demo (the playground's)", path, meta.Kind, ns)
		}
	}
	return out
}

// TestGroupExamples reads each example of examples/gang-groups as the scheduler would see it in the
// playground and checks it is what its comments say: every pod names custom-scheduler and a group
// that exists (written, or made by the scheduler from LeaderWorkerSet labels); each PodGroup has
// exactly minMember pods; the groups make one valid tree whose root is the example's composite; and,
// for the LeaderWorkerSet, the pods are shaped as LWS makes them and the leader StatefulSet adopts
// exactly the leaders.
func TestGroupExamples(t *testing.T) {
	for name, ex := range groupExamples {
		t.Run(name, func(t *testing.T) {
			objs := readExample(t, filepath.Join("..", "..", groupExamplesDir, ex.file))
			if len(objs.pods) == 0 {
				t.Fatal("no pods")
			}
			groups := map[string]*v1alpha1.PodGroup{}
			for _, pg := range objs.podGroups {
				groups[pg.Name] = pg
			}
			lwsAdopt(t, objs)
			for _, pod := range objs.pods {
				if !podgroup.LWSLeader(pod) {
					continue
				}
				if _, ok := podgroup.LWSGroup(pod); !ok {
					continue
				}
				group, composite, err := podgroup.LWSPodGroups(pod)
				if err != nil {
					t.Fatalf("the scheduler makes no PodGroup of leader %s: %v", pod.Name, err)
				}
				for _, pg := range []*v1alpha1.PodGroup{group, composite} {
					if pg == nil {
						continue
					}
					if have, ok := groups[pg.Name]; ok && have.Labels[podgroup.LabelManagedBy] != podgroup.ManagedBy {
						t.Errorf("PodGroup %s is written in the file and made by the scheduler", pg.Name)
					}
					groups[pg.Name] = pg
				}
			}

			members := map[string]int{}
			for _, pod := range objs.pods {
				if pod.Spec.SchedulerName != schedulerName {
					t.Errorf("pod %s names scheduler %q, want %s", pod.Name, pod.Spec.SchedulerName, schedulerName)
				}
				g, ok := podgroup.Of(pod)
				if !ok {
					t.Errorf("pod %s is in no group", pod.Name)
					continue
				}
				if _, ok := groups[g]; !ok {
					t.Errorf("pod %s's group %s does not exist", pod.Name, g)
				}
				members[g]++
			}

			index := tree.NewIndex()
			for _, pg := range groups {
				index.Set(tree.FromPodGroup(pg, podgroup.MinMember(pg), true))
			}
			children := 0
			for gname, pg := range groups {
				node := tree.FromPodGroup(pg, podgroup.MinMember(pg), true)
				if node.Invalid != "" {
					t.Errorf("PodGroup %s: %s", gname, node.Invalid)
				}
				b, problem := index.Resolve("demo", gname)
				switch {
				case problem != nil:
					t.Errorf("PodGroup %s's tree: %s: %s", gname, problem.Reason, problem.Message)
				case b == nil || b.Name != ex.root:
					t.Errorf("PodGroup %s is not in the tree of %s", gname, ex.root)
				}
				if node.Composite {
					if members[gname] != 0 {
						t.Errorf("composite %s has %d pods, want none", gname, members[gname])
					}
					continue
				}
				children++
				if node.Parent != ex.root {
					t.Errorf("PodGroup %s's parent is %q, want %s", gname, node.Parent, ex.root)
				}
				if members[gname] != node.Min {
					t.Errorf("PodGroup %s has %d pods, want its minMember %d", gname, members[gname], node.Min)
				}
			}
			root, ok := groups[ex.root]
			if !ok {
				t.Fatalf("no composite %s", ex.root)
			}
			k, _ := strconv.Atoi(root.Annotations[tree.AnnotationMinGroupCount])
			if k < 1 || k > children {
				t.Errorf("composite %s: min-group-count %d of %d children", ex.root, k, children)
			}
			b, _ := index.Resolve("demo", ex.root)
			if b == nil || !b.Ready(func(key string) int { return members[strings.TrimPrefix(key, "demo/")] }) {
				t.Errorf("the job %s is not ready with all its pods", ex.root)
			}
		})
	}
}

// lwsAdopt checks the LeaderWorkerSet's pods (pods with its labels) are shaped as LWS v0.8.0 makes
// them and that a StatefulSet of the example adopts each leader and no worker, as the StatefulSet
// controller will (its name is the leader's without the ordinal, and its selector selects it); it sets
// the controller reference the adoption writes.
func lwsAdopt(t *testing.T, objs exampleObjects) {
	t.Helper()
	type replica struct {
		size    string
		workers []int
		leader  string
	}
	replicas := map[string]*replica{}
	ordinal := regexp.MustCompile(`^(.*)-([0-9]+)$`)
	for _, pod := range objs.pods {
		set := pod.Labels[podgroup.LWSNameLabel]
		if set == "" {
			continue
		}
		g, ok := podgroup.LWSGroup(pod)
		if !ok {
			t.Errorf("pod %s has LWS's set label but is no replica's member (labels %v, annotations %v)", pod.Name, pod.Labels, pod.Annotations)
			continue
		}
		r := replicas[g]
		if r == nil {
			r = &replica{size: pod.Annotations[podgroup.LWSSizeAnnotation]}
			replicas[g] = r
		}
		if pod.Annotations[podgroup.LWSSizeAnnotation] != r.size {
			t.Errorf("pod %s: size %s, its replica's others %s", pod.Name, pod.Annotations[podgroup.LWSSizeAnnotation], r.size)
		}
		w, err := strconv.Atoi(pod.Labels[podgroup.LWSWorkerIndex])
		if err != nil {
			t.Errorf("pod %s: worker-index %q", pod.Name, pod.Labels[podgroup.LWSWorkerIndex])
			continue
		}
		r.workers = append(r.workers, w)
		// LWS's names: the leader <set>-<group-index>, its workers <leader>-<worker-index>.
		want := g
		if w > 0 {
			want = fmt.Sprintf("%s-%d", g, w)
			if pod.Annotations["leaderworkerset.sigs.k8s.io/leader-name"] != g {
				t.Errorf("worker %s: leader-name %q, want %s", pod.Name, pod.Annotations["leaderworkerset.sigs.k8s.io/leader-name"], g)
			}
		} else {
			r.leader = pod.Name
		}
		if pod.Name != want {
			t.Errorf("pod %s: LWS would name it %s", pod.Name, want)
		}
		var owners []string
		for _, s := range objs.statefulSets {
			sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
			if err != nil {
				t.Fatal(err)
			}
			m := ordinal.FindStringSubmatch(pod.Name)
			if !sel.Matches(labels.Set(pod.Labels)) || m == nil || m[1] != s.Name {
				continue
			}
			owners = append(owners, s.Name)
			if !sel.Matches(labels.Set(s.Spec.Template.Labels)) {
				t.Errorf("StatefulSet %s's selector does not select its template", s.Name)
			}
			if n, _ := strconv.Atoi(m[2]); n >= int(*s.Spec.Replicas) || s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
				t.Errorf("StatefulSet %s would replace pod %s (replicas %d, updateStrategy %s)", s.Name, pod.Name, *s.Spec.Replicas, s.Spec.UpdateStrategy.Type)
			}
			yes := true
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: s.Name, UID: "1", Controller: &yes}}
		}
		if want := map[bool]int{true: 1, false: 0}[w == 0]; len(owners) != want {
			t.Errorf("pod %s (worker-index %d) is adopted by StatefulSets %v, want %d", pod.Name, w, owners, want)
		}
	}
	for g, r := range replicas {
		size, _ := strconv.Atoi(r.size)
		slices.Sort(r.workers)
		want := make([]int, size)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(r.workers, want) {
			t.Errorf("replica %s: worker indexes %v, want %v (size %d)", g, r.workers, want, size)
		}
	}
}

// TestGroupExampleRoom checks what the examples' comments say binds on the playground's default
// nodes (4 of nodeCPU and 32Gi), as Fit and LoadAware see them while a job's pods are placed: a node's
// requests within its capacity, and its usage (baseUsage, as simulateUsage reports it) plus LoadAware's
// estimates of the pods just placed (85% of cpu and 70% of memory requests, its defaults) within the
// shipped thresholds (cpu 80%, memory 90%). kwok-node-0 (85% cpu) takes none. The disaggregated job
// fits whole; of the LeaderWorkerSet, exactly min-group-count replicas fit, fewer than it has.
func TestGroupExampleRoom(t *testing.T) {
	const (
		capMem             = 32 << 30
		cpuEst, memEst     = 0.85, 0.70
		cpuLimit, memLimit = 0.80, 0.90
	)
	q := resource.MustParse(nodeCPU)
	capCPU := float64(q.MilliValue())
	type node struct{ cpu, mem, estCPU, estMem float64 }
	nodes := func() []*node {
		var out []*node
		for i := range 4 {
			b := baseUsage(i, fmt.Sprintf("kwok-node-%d", i))
			out = append(out, &node{estCPU: b * capCPU, estMem: b * capMem})
		}
		return out
	}
	requests := func(p *corev1.Pod) (cpu, mem float64) {
		for _, c := range p.Spec.Containers {
			cpu += float64(c.Resources.Requests.Cpu().MilliValue())
			mem += float64(c.Resources.Requests.Memory().Value())
		}
		return cpu, mem
	}
	// place puts the pod on the first node it fits (Fit and LoadAware's filter), or reports false.
	place := func(ns []*node, p *corev1.Pod) bool {
		cpu, mem := requests(p)
		for _, n := range ns {
			if n.cpu+cpu <= capCPU && n.mem+mem <= capMem &&
				n.estCPU+cpuEst*cpu <= cpuLimit*capCPU && n.estMem+memEst*mem <= memLimit*capMem {
				n.cpu, n.mem, n.estCPU, n.estMem = n.cpu+cpu, n.mem+mem, n.estCPU+cpuEst*cpu, n.estMem+memEst*mem
				return true
			}
		}
		return false
	}

	dis := readExample(t, filepath.Join("..", "..", groupExamplesDir, groupExamples["disaggregated"].file))
	slices.SortFunc(dis.pods, func(a, b *corev1.Pod) int { // largest first
		ca, _ := requests(a)
		cb, _ := requests(b)
		return int(cb - ca)
	})
	ns := nodes()
	for _, p := range dis.pods {
		if !place(ns, p) {
			t.Errorf("the disaggregated job does not fit whole: no room for %s", p.Name)
		}
	}

	// The replicas are alike: place them whole, one after the other, until one does not fit.
	lws := readExample(t, filepath.Join("..", "..", groupExamplesDir, groupExamples["lws"].file))
	byReplica := map[string][]*corev1.Pod{}
	k := 0
	for _, p := range lws.pods {
		g, _ := podgroup.LWSGroup(p)
		byReplica[g] = append(byReplica[g], p)
		k, _ = strconv.Atoi(p.Annotations[tree.AnnotationMinGroupCount])
	}
	ns = nodes()
	whole := 0
	for range byReplica {
		pods := byReplica[fmt.Sprint("llm-", whole)]
		placed := 0
		for _, p := range pods {
			if place(ns, p) {
				placed++
			}
		}
		if placed < len(pods) {
			break
		}
		whole++
	}
	if whole != k || whole >= len(byReplica) {
		t.Errorf("%d replicas of %d fit whole, want min-group-count %d (fewer than the replicas)", whole, len(byReplica), k)
	}
}

// TestWholeOf: a gang composite is whole with min-group-count children whole.
func TestWholeOf(t *testing.T) {
	pg := func(name, parent string, minMember int32, count string) v1alpha1.PodGroup {
		p := v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, Annotations: map[string]string{}}, Spec: v1alpha1.PodGroupSpec{MinMember: minMember}}
		if parent != "" {
			p.Annotations[tree.AnnotationParent] = parent
		}
		if count != "" {
			p.Annotations[tree.AnnotationMinGroupCount] = count
		}
		return p
	}
	pod := func(group, node string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Labels: map[string]string{v1alpha1.PodGroupLabel: group}}, Spec: corev1.PodSpec{NodeName: node}}
	}
	pgs := []v1alpha1.PodGroup{pg("llm", "", 1, "2"), pg("a", "llm", 2, ""), pg("b", "llm", 2, ""), pg("c", "llm", 2, "")}
	pods := []corev1.Pod{pod("a", "n1"), pod("a", "n2"), pod("b", "n1"), pod("b", ""), pod("c", "n3")}
	whole, msg, err := wholeOf(pgs, pods, "llm")
	if err != nil || whole || msg != "1 of min-group-count 2 groups whole: a 2/2, b 1/2, c 1/2" {
		t.Errorf("got %v %q %v", whole, msg, err)
	}
	pods[3].Spec.NodeName = "n3"
	if whole, msg, _ = wholeOf(pgs, pods, "llm"); !whole {
		t.Errorf("not whole: %s", msg)
	}
	if whole, msg, _ = wholeOf(pgs[1:], pods, "llm"); whole || msg != "no PodGroup llm yet" {
		t.Errorf("without the composite: %v %q", whole, msg)
	}
	if _, _, err = wholeOf(pgs, pods, "a"); err == nil {
		t.Error("a PodGroup that is no composite: no error")
	}
}

// TestGroupExamplesREADME: the README of examples/gang-groups links files that exist.
func TestGroupExamplesREADME(t *testing.T) {
	dir := filepath.Join("..", "..", groupExamplesDir)
	data, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(string(data), -1)
	if len(links) == 0 {
		t.Fatal("no links")
	}
	for _, l := range links {
		if _, err := os.Stat(filepath.Join(dir, l[1])); err != nil {
			t.Errorf("README.md links %s: %v", l[1], err)
		}
	}
	for _, ex := range groupExamples {
		if !strings.Contains(string(data), "("+ex.file+")") {
			t.Errorf("README.md does not link %s", ex.file)
		}
	}
}
