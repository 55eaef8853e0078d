package gangpreemption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

func pod(name, group, node string, prio int32) *v1.Pod {
	b := st.MakePod().Namespace("ns").Name(name).UID(name).Node(node).Priority(prio)
	if group != "" {
		b = b.Label(v1alpha1.PodGroupLabel, group)
	}
	return b.Obj()
}

// leavingPod is a pod the scheduler's preemption is terminating.
func leavingPod(name, node string, prio int32) *v1.Pod {
	p := pod(name, "", node, prio)
	p.DeletionTimestamp = &metav1.Time{}
	p.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
	return p
}

func TestFirstOfItsGang(t *testing.T) {
	a0, a1, b0, plain := pod("a0", "a", "n", 0), pod("a1", "a", "n", 0), pod("b0", "b", "n", 0), pod("x", "", "n", 0)
	other := pod("a2", "a", "n", 0)
	other.Namespace = "other"
	victims := []*v1.Pod{plain, a0, b0, a1, other}
	cases := []struct {
		name   string
		victim *v1.Pod
		want   bool
	}{
		{name: "the first member of a gang", victim: a0, want: true},
		{name: "a later member of the same gang", victim: a1},
		{name: "the first member of another gang", victim: b0, want: true},
		{name: "a gang of the same name in another namespace", victim: other, want: true},
		{name: "a plain pod", victim: plain},
		{name: "a member not among the victims", victim: pod("c0", "c", "n", 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := FirstOfItsGang(tc.victim, victims); got != tc.want {
				t.Errorf("FirstOfItsGang = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGangAsPreemptor(t *testing.T) {
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "pg-uid", ResourceVersion: "7"}}
	m0, m1 := pod("m0", "g", "", 100), pod("m1", "g", "", 100)
	g := NewGang(pg, []*v1.Pod{m0, m1}, 100, "custom-scheduler")
	var p preemption.ExecutorPreemptor = g
	if p.GetName() != "g" || p.GetNamespace() != "ns" || p.UID() != "pg-uid" || p.Priority() != 100 || p.SchedulerName() != "custom-scheduler" || p.Type() != PreemptorType {
		t.Errorf("preemptor = %s/%s uid %s prio %d scheduler %s type %s", p.GetNamespace(), p.GetName(), p.UID(), p.Priority(), p.SchedulerName(), p.Type())
	}
	wantRef := &v1.ObjectReference{APIVersion: "scheduling.x-k8s.io/v1alpha1", Kind: "PodGroup", Namespace: "ns", Name: "g", UID: "pg-uid", ResourceVersion: "7"}
	if diff := cmp.Diff(wantRef, p.Obj()); diff != "" {
		t.Errorf("Obj (-want,+got): %s", diff)
	}
	if diff := cmp.Diff(map[string]*v1.Pod{"ns/m0": m0, "ns/m1": m1}, p.Pods()); diff != "" {
		t.Errorf("Pods (-want,+got): %s", diff)
	}
}

func TestTerminatingVictims(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode().Name("n0").Obj(), st.MakeNode().Name("n1").Obj()}
	pods := []*v1.Pod{
		leavingPod("low-0", "n0", 10),
		leavingPod("low-1", "n0", 10),
		leavingPod("high", "n0", 200),
		leavingPod("low-n1", "n1", 10),
		pod("running", "", "n0", 10),
	}
	deleted := pod("deleted", "", "n1", 10)
	deleted.DeletionTimestamp = &metav1.Time{} // deleted, not by preemption
	pods = append(pods, deleted)
	infos := internalcache.NewSnapshot(pods, nodes).NodeInfos()
	cases := []struct {
		name  string
		nodes []string
		prio  int32
		want  int
	}{
		{name: "lower-priority victims on one node", nodes: []string{"n0"}, prio: 100, want: 2},
		{name: "a node named twice counts once", nodes: []string{"n0", "n0"}, prio: 100, want: 2},
		{name: "every nominated node", nodes: []string{"n0", "n1"}, prio: 100, want: 3},
		{name: "victims of higher priority are not waited for", nodes: []string{"n0"}, prio: 300, want: 3},
		{name: "a node not in the snapshot", nodes: []string{"gone"}, prio: 100},
		{name: "no node", prio: 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := TerminatingVictims(infos, tc.nodes, tc.prio); got != tc.want {
				t.Errorf("TerminatingVictims = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestGangIndexIsLazy(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode().Name("n0").Obj()}
	snap := internalcache.NewSnapshot([]*v1.Pod{pod("a0", "a", "n0", 5), pod("a1", "a", "n0", 7), pod("x", "", "n0", 1)}, nodes)
	counting := &countingLister{NodeInfoLister: snap.NodeInfos()}
	state := framework.NewCycleState()
	PrepareGangIndex(state, counting)
	if counting.lists != 0 {
		t.Fatalf("the index was built before it was needed (%d lists)", counting.lists)
	}
	d, err := state.Read(gangIndexKey)
	if err != nil {
		t.Fatal(err)
	}
	l := d.(*lazyGangIndex)
	if l.Clone() != l {
		t.Error("a clone of the cycle state must share the index")
	}
	idx := l.get()
	l.get()
	if counting.lists != 1 {
		t.Errorf("nodes listed %d times, want once", counting.lists)
	}
	g := idx["ns/a"]
	if g == nil || len(g.Pods()) != 2 || g.Priority() != 7 {
		t.Fatalf("gang ns/a = %v, want 2 pods at priority 7", g)
	}
	if len(idx) != 1 {
		t.Errorf("index has %d gangs, want 1 (a plain pod is no gang)", len(idx))
	}
}

type countingLister struct {
	fwk.NodeInfoLister
	lists int
}

func (c *countingLister) List() ([]fwk.NodeInfo, error) {
	c.lists++
	return c.NodeInfoLister.List()
}

func TestMetricsKind(t *testing.T) {
	for in, want := range map[string]string{PreemptorType: "gang", "Pod": "pod", "": "pod", "CompositePodGroup": "pod"} {
		if got := MetricsKind(in); got != want {
			t.Errorf("MetricsKind(%q) = %q, want %q", in, got, want)
		}
	}
}
