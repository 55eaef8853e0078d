package integration

// Gangs whose members have different shapes, on nodes sized so that exactly one placement exists: the
// placement plan gives every member of the quorum a node before any is reserved, and keeps each node's
// places per shape, so a small member (an MPI launcher, a Ray head) never takes the room a big one (a
// GPU worker) needs on that node. Before the plan kept shapes apart, a mixed gang was not planned at
// all: its launcher was placed wherever the Score plugins put it, and in about one run in two that was
// a device node, after which no worker fitted and the gang was never placed.

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// mixedRepetitions is how often each one-placement case is run: a gang placed by chance one run in
// two fails one of ten with a chance of 1 in 1024.
const mixedRepetitions = 10

// anyNode is where a member may go wherever it fits.
const anyNode = "*"

// TestMixedShapeGangs runs the one-placement shapes with the shipped profile: a CPU launcher beside
// CPU workers, a launcher beside GPU workers (claims from a template, made by the resourceclaim
// controller), a Ray-shaped gang (a CPU head, GPU workers) and a gang of three shapes. Each gang must
// be bound whole with every member where the one placement puts it.
func TestMixedShapeGangs(t *testing.T) {
	needControllerManager(t)
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, false)
	e.claimTemplate(t, "gpu")
	// Four device nodes of 7 CPU and one device each, one CPU node of 4 CPU; every node is of the
	// role "mpi", so nothing but room keeps the launcher off a device node.
	for i := range 4 {
		e.node(t, fmt.Sprintf("%s-gpu-%d", ns, i), "7", "mpi", 1, nil)
	}
	cpuNode := ns + "-cpu"
	e.node(t, cpuNode, "4", "mpi", 0, nil)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	// runGang creates the gang (members by name), waits for it to be bound whole, checks where each
	// member went (want: name → node, "" for any device node, anyNode for any), then deletes it and waits until its
	// pods and claims are gone.
	runGang := func(t *testing.T, group string, members map[string]*v1.Pod, want map[string]string) {
		t.Helper()
		watchWhole(t, ns, group, len(members), nil)
		createPodGroup(t, ns, group, int64(len(members)), 0)
		for _, p := range members {
			createPod(t, p)
		}
		nodes := waitForDRAGangBound(t, ns, group, len(members))
		for name, node := range nodes {
			switch w := want[name]; {
			case w == anyNode:
			case w == "" && node == cpuNode:
				t.Errorf("%s: member %s is on the CPU node %s, want a device node", group, name, node)
			case w != "" && node != w:
				t.Errorf("%s: member %s is on %s, want %s", group, name, node, w)
			}
		}
		names := make([]string, 0, len(members))
		for name := range members {
			names = append(names, name)
		}
		forceDelete(t, ns, names...)
		if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			pods, err := groupPods(ctx, ns, group)
			if err != nil || len(pods) > 0 {
				return false, err
			}
			claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(claims.Items) == 0, err
		}); err != nil {
			t.Fatalf("%s: its pods and claims did not go: %v\n%s", group, err, dumpNamespace(ns))
		}
	}

	// headAndWorkers is a gang of a head of headCPU on the CPU node and four workers of workerCPU
	// (each with a device when gpu) on the device nodes: its members and where each must go.
	headAndWorkers := func(group, headCPU, workerCPU string, gpu bool) (map[string]*v1.Pod, map[string]string) {
		head := group + "-head"
		members, want := map[string]*v1.Pod{head: e.pod(head, group, headCPU, "mpi")}, map[string]string{head: cpuNode}
		for i := range 4 {
			name := fmt.Sprintf("%s-worker-%d", group, i)
			members[name], want[name] = e.pod(name, group, workerCPU, "mpi"), ""
			if gpu {
				members[name] = e.claimPod(name, group, workerCPU, "mpi", "gpu")
			}
		}
		return members, want
	}

	t.Run("a CPU launcher beside CPU workers, 10 times", func(t *testing.T) {
		for r := range mixedRepetitions {
			group := fmt.Sprintf("cpu-mpi-%d", r)
			members, want := headAndWorkers(group, "3", "6", false)
			runGang(t, group, members, want)
		}
	})

	t.Run("a launcher beside GPU workers, 10 times", func(t *testing.T) {
		for r := range mixedRepetitions {
			group := fmt.Sprintf("gpu-mpi-%d", r)
			members, want := headAndWorkers(group, "3", "6", true)
			runGang(t, group, members, want)
		}
	})

	t.Run("a Ray-shaped gang: a CPU head and GPU workers", func(t *testing.T) {
		members, want := headAndWorkers("ray", "4", "5", true)
		runGang(t, "ray", members, want)
	})

	t.Run("a gang of three shapes", func(t *testing.T) {
		// A launcher of 3 CPU, four GPU workers of 6 CPU and two helpers of 1 CPU: the workers
		// leave 1 CPU on each device node, the launcher 1 on the CPU node. A helper may go to any
		// node with 1 CPU left, but two helpers on the CPU node would leave no room for the launcher.
		group := "three"
		members, want := headAndWorkers(group, "3", "6", true)
		for i := range 2 {
			name := fmt.Sprintf("three-helper-%d", i)
			members[name], want[name] = e.pod(name, group, "1", "mpi"), anyNode
		}
		runGang(t, group, members, want)
	})
}
