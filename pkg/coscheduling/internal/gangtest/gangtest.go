// Package gangtest builds the pods and nodes that the gang plugin's unit tests (and those of its
// pure placement package, gangfit) share: gang members, bound pods with priorities, nodes with CPU
// and topology labels. Tests only.
package gangtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// Topology label keys of RackedNode.
const (
	ZoneKey  = "topology.kubernetes.io/zone"
	BlockKey = "example.com/block"
	RackKey  = "example.com/rack"
)

// Member is a pending member of PodGroup group in namespace "ns" (UID = name), of scheduler "test",
// requesting cpu.
func Member(name, group, cpu string) *v1.Pod {
	return st.MakePod().Namespace("ns").Name(name).UID(name).SchedulerName("test").Label(v1alpha1.PodGroupLabel, group).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj()
}

// GangOf is n members of PodGroup "g" ("m0", "m1", ...), each requesting cpu.
func GangOf(n int, cpu string) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = Member(fmt.Sprintf("m%d", i), "g", cpu)
	}
	return pods
}

// HighGang is n pending members of PodGroup "hi" at priority 100, each requesting cpu.
func HighGang(n int, cpu string) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = st.MakePod().Namespace("ns").Name(fmt.Sprintf("hi-%d", i)).UID(fmt.Sprintf("hi-%d", i)).
			Label(v1alpha1.PodGroupLabel, "hi").Priority(100).Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj()
	}
	return pods
}

// Running is a pod bound to node with a CPU request and a priority; group "" for a plain pod.
func Running(name, group, node, cpu string, prio int32) *v1.Pod {
	b := st.MakePod().Namespace("ns").Name(name).UID(name).Node(node).Priority(prio).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu})
	if group != "" {
		b = b.Label(v1alpha1.PodGroupLabel, group)
	}
	p := b.Obj()
	// One start time for all: victims of equal priority and size keep the snapshot's order.
	p.Status.StartTime = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return p
}

// Node is a node with cpu CPUs, 8Gi of memory and 110 pod slots.
func Node(name, cpu string) *framework.NodeInfo { return NodeWith(name, cpu) }

// NodeWith is Node with pods on it.
func NodeWith(name, cpu string, pods ...*v1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj())
	return ni
}

// CPUNode is a node with cpu CPUs, 64Gi of memory and the pods on it.
func CPUNode(name, cpu string, pods ...*v1.Pod) fwk.NodeInfo {
	n := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourceMemory: "64Gi", v1.ResourcePods: "110"}).Obj()
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(n)
	return ni
}

// RackedNode is a 4-CPU node in a zone, block and rack ("" leaves a label off).
func RackedNode(name, zone, block, rack string, pods ...*v1.Pod) fwk.NodeInfo {
	labels := map[string]string{}
	for k, v := range map[string]string{ZoneKey: zone, BlockKey: block, RackKey: rack} {
		if v != "" {
			labels[k] = v
		}
	}
	n := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj()
	n.Labels = labels
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(n)
	return ni
}

// RackedCluster: zone z1 = block b1 (rack r1: 2 nodes, rack r2: 4 nodes) + block b2 (rack r3: 3
// nodes); one node without labels.
func RackedCluster() []fwk.NodeInfo {
	var nodes []fwk.NodeInfo
	add := func(n int, block, rack string) {
		for i := range n {
			nodes = append(nodes, RackedNode(fmt.Sprintf("%s-%d", rack, i), "z1", block, rack))
		}
	}
	add(2, "b1", "r1")
	add(4, "b1", "r2")
	add(3, "b2", "r3")
	nodes = append(nodes, RackedNode("bare", "", "", ""))
	return nodes
}

// PodGroup is a PodGroup of minMember created at created.
func PodGroup(ns, name string, minMember int32, created time.Time) *v1alpha1.PodGroup {
	return &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created), ResourceVersion: "1"},
		Spec:       v1alpha1.PodGroupSpec{MinMember: minMember},
	}
}

// RunSeeded runs rounds of a randomized test, round r with its own generator from the seed (SEED=<n>
// replays one run; otherwise the time), until a round fails; then it prints the seed to replay.
func RunSeeded(t *testing.T, rounds int, round func(t *testing.T, rng *rand.Rand, round int) bool) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("replay with SEED=%d", seed)
		}
	}()
	for r := range rounds {
		if !round(t, rand.New(rand.NewPCG(seed, uint64(r))), r) {
			return
		}
	}
}
