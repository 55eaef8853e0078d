package interop

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/custom-scheduler/custom-scheduler/test/operatorenv"
)

var lwsGVR = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}

// startLWS applies LeaderWorkerSet's CRD from the module cache and runs its controller v0.8.0 out of a
// cluster as JobSet's runs (startJobSet): internal certificate management off, a self-signed serving
// certificate, its webhooks (LWS defaulting and validation, and the pod webhook that labels each pod
// with its replica) called by URL on loopback for namespace ns only.
func startLWS(t *testing.T, ns string) *process {
	t.Helper()
	return startWebhookOperator(t, ns, "lws", operatorenv.LWSModule, operatorenv.LWSCRD, operatorenv.LWSWebhooks, operatorenv.LWSConfig, "--leader-elect=false")
}

// lwsGroup is the group of a LeaderWorkerSet's pod as LWS labels it: its replica's leader's name.
func lwsGroup(set string, replica int) string { return fmt.Sprintf("%s-%d", set, replica) }

// TestLeaderWorkerSet runs the LeaderWorkerSet controller v0.8.0 (with its webhooks) against
// custom-scheduler, with no PodGroup written (examples/operators/lws-leaderworkerset.yaml):
//   - serve, two replicas of a leader and two workers of 5 CPU, on four nodes of 8 CPU (room for four
//     such pods): one replica binds whole and the other binds none (one by one, four pods of both
//     would bind); each replica's PodGroup is the scheduler's, minMember 3, owned by its leader pod;
//   - pair, two replicas of one pod of 5 CPU asking for both whole (min-group-count 2, K of N), with
//     one node left: nothing binds (on its own, one replica would);
//   - serve deleted: its pods go, its PodGroups with them (the garbage collector), and pair binds whole;
//   - ready, one replica of a leader and two workers of 1 CPU with startupPolicy LeaderReady (LWS makes
//     the workers once the leader is Ready): its PodGroup is of minMember 1, read from the set, so the
//     leader binds alone, the kubelet stand-in makes it Ready, and the workers come and bind. (With
//     minMember 3 the leader would wait for workers that never come.)
//
// The gang invariant is watched throughout, for the groups LWS's labels name.
func TestLeaderWorkerSet(t *testing.T) {
	ns := testNamespace(t, "lws")
	startLWS(t, ns)
	ctx := context.Background()

	createObject(t, lwsGVR, ns, readExample(t, "lws-leaderworkerset.yaml"))
	bound := func(ctx context.Context, set string) (perReplica []int, pods int, err error) {
		list, err := lwsPods(ctx, ns, set)
		perReplica = make([]int, 2)
		for _, p := range list {
			var r int
			if _, err := fmt.Sscan(p.Labels[lwsGroupIndexLabel], &r); err == nil && r < 2 && liveAndBound(&p) {
				perReplica[r]++
			}
		}
		return perReplica, len(list), err
	}
	oneWhole := func(ctx context.Context) (bool, error) {
		n, pods, err := bound(ctx, "serve")
		return pods == 6 && n[0]+n[1] == 3 && (n[0] == 0 || n[1] == 0), err
	}
	waitFor(t, "one replica of serve bound whole, the other unbound", 120*time.Second, oneWhole)
	for r := range 2 {
		pg := waitPodGroup(t, ns, lwsGroup("serve", r))
		if spec := specOf(t, pg); spec.MinMember != 3 {
			t.Errorf("PodGroup %s: minMember %d, want the replica's size 3", pg.GetName(), spec.MinMember)
		}
		if refs := pg.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].Name != lwsGroup("serve", r) {
			t.Errorf("PodGroup %s is owned by %v, want its leader pod", pg.GetName(), refs)
		}
	}
	consistentlyFor(t, "one replica of serve whole, the other unbound", 5*time.Second, oneWhole)

	// K of N: two replicas of one pod, both or none; one node is left.
	pair := parseYAML(t, readExample(t, "lws-leaderworkerset.yaml"))
	pair.SetName("pair")
	must(t, unstructured.SetNestedField(pair.Object, int64(1), "spec", "leaderWorkerTemplate", "size"))
	for _, tmpl := range []string{"leaderTemplate", "workerTemplate"} {
		must(t, unstructured.SetNestedStringMap(pair.Object, map[string]string{"scheduling.x-k8s.io/min-group-count": "2"},
			"spec", "leaderWorkerTemplate", tmpl, "metadata", "annotations"))
	}
	createObject(t, lwsGVR, ns, toYAML(t, pair))
	composite := waitPodGroup(t, ns, "pair")
	if got := composite.GetAnnotations()["scheduling.x-k8s.io/min-group-count"]; got != "2" {
		t.Errorf("composite PodGroup pair: min-group-count %q, want 2", got)
	}
	noneOfPair := func(ctx context.Context) (bool, error) {
		n, pods, err := bound(ctx, "pair")
		return pods == 2 && n[0] == 0 && n[1] == 0, err
	}
	waitFor(t, "pair's two pods created", 60*time.Second, noneOfPair)
	consistentlyFor(t, "no replica of pair bound", 5*time.Second, noneOfPair)

	must(t, dyn.Resource(lwsGVR).Namespace(ns).Delete(ctx, "serve", metav1.DeleteOptions{}))
	waitFor(t, "serve's PodGroups deleted with their leader pods, and pair bound whole", 120*time.Second, func(ctx context.Context) (bool, error) {
		for r := range 2 {
			if _, err := getPodGroup(ctx, ns, lwsGroup("serve", r)); err == nil || ignoreNotFound(err) != nil {
				return false, ignoreNotFound(err)
			}
		}
		n, _, err := bound(ctx, "pair")
		return n[0] == 1 && n[1] == 1, err
	})

	// LeaderReady: the workers come after the leader is Ready.
	ready := parseYAML(t, readExample(t, "lws-leaderworkerset.yaml"))
	ready.SetName("ready")
	must(t, unstructured.SetNestedField(ready.Object, int64(1), "spec", "replicas"))
	must(t, unstructured.SetNestedField(ready.Object, "LeaderReady", "spec", "startupPolicy"))
	for _, tmpl := range []string{"leaderTemplate", "workerTemplate"} {
		path := []string{"spec", "leaderWorkerTemplate", tmpl, "spec", "containers"}
		containers, _, err := unstructured.NestedSlice(ready.Object, path...)
		must(t, err)
		must(t, unstructured.SetNestedField(containers[0].(map[string]any), "1", "resources", "requests", "cpu"))
		must(t, unstructured.SetNestedSlice(ready.Object, containers, path...))
	}
	createObject(t, lwsGVR, ns, toYAML(t, ready))
	pg := waitPodGroup(t, ns, lwsGroup("ready", 0))
	if spec := specOf(t, pg); spec.MinMember != 1 {
		t.Errorf("PodGroup %s: minMember %d, want 1 (startupPolicy LeaderReady: the leader alone)", pg.GetName(), spec.MinMember)
	}
	waitFor(t, "ready's leader bound, made Ready, and its two workers made and bound", 120*time.Second, func(ctx context.Context) (bool, error) {
		n, pods, err := bound(ctx, "ready")
		return pods == 3 && n[0] == 3, err
	})
}

const (
	lwsNameLabel       = "leaderworkerset.sigs.k8s.io/name"
	lwsGroupIndexLabel = "leaderworkerset.sigs.k8s.io/group-index"
)

// lwsPods lists the pods of LeaderWorkerSet set.
func lwsPods(ctx context.Context, ns, set string) ([]v1.Pod, error) {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: lwsNameLabel + "=" + set})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// consistentlyFor fails the test unless cond holds at every poll for d.
func consistentlyFor(t *testing.T, what string, d time.Duration, cond func(context.Context) (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ok, err := cond(context.Background())
		if err != nil || !ok {
			t.Fatalf("expected %s for %v, but it stopped holding (err %v)", what, d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
