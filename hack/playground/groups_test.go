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
// nodes: the disaggregated job fits on three of them (kwok-node-0 runs hot: LoadAware keeps pods off
// it), and of the LeaderWorkerSet exactly min-group-count replicas fit, whether three nodes or all four
// take pods.
func TestGroupExampleRoom(t *testing.T) {
	q := resource.MustParse(nodeCPU)
	nodeCPU := q.MilliValue()
	cpu := func(p *corev1.Pod) int64 {
		var n int64
		for _, c := range p.Spec.Containers {
			n += c.Resources.Requests.Cpu().MilliValue()
		}
		return n
	}

	dis := readExample(t, filepath.Join("..", "..", groupExamplesDir, groupExamples["disaggregated"].file))
	sizes := make([]int64, 0, len(dis.pods))
	for _, p := range dis.pods {
		sizes = append(sizes, cpu(p))
	}
	slices.Sort(sizes)
	slices.Reverse(sizes)
	free := []int64{nodeCPU, nodeCPU, nodeCPU}
	for _, s := range sizes { // first fit, largest first
		i := slices.IndexFunc(free, func(f int64) bool { return f >= s })
		if i < 0 {
			t.Fatalf("the disaggregated job does not fit on 3 nodes of %d m CPU (pods %v)", nodeCPU, sizes)
		}
		free[i] -= s
	}

	lws := readExample(t, filepath.Join("..", "..", groupExamplesDir, groupExamples["lws"].file))
	per := map[int64]bool{}
	replicas := map[string]bool{}
	var size, k int
	for _, p := range lws.pods {
		per[cpu(p)] = true
		g, _ := podgroup.LWSGroup(p)
		replicas[g] = true
		size, _ = strconv.Atoi(p.Annotations[podgroup.LWSSizeAnnotation])
		k, _ = strconv.Atoi(p.Annotations[tree.AnnotationMinGroupCount])
	}
	if len(per) != 1 {
		t.Fatalf("the LeaderWorkerSet's pods ask different CPU %v: this check wants one size", per)
	}
	for podCPU := range per {
		for _, nodes := range []int{3, 4} {
			fit := nodes * int(nodeCPU/podCPU) / size
			if fit != k || fit >= len(replicas) {
				t.Errorf("on %d nodes %d replicas of %d fit whole, want min-group-count %d (fewer than the %d replicas)", nodes, fit, len(replicas), k, len(replicas))
			}
		}
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
