package interop

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// The quorum as Permit holds it and as the status counts it, through JobSet: the scenarios of
// TestJobSet bind whole whatever Permit does (a gang that fits is placed in one burst, and a gang too
// big is held before Permit, at PreFilter), and JobSet's restart deletes the old attempt's pods before
// the status could count them. These two tests make both show.

// quorumJobSet is PodGroup <name> (minMember 5) and a JobSet <name> of a driver (1 Job of 1 pod) and
// workers (2 Jobs of 2 pods), 1 CPU each, every pod in the PodGroup. The workers' Jobs replace a failed
// pod backoffLimit times (0: a failed worker fails its Job, and the JobSet, which does not restart).
// With claim set, the driver's pod asks for the ResourceClaim of that name (which the test creates
// when it chooses).
func quorumJobSet(name, claim string, backoffLimit int) (podGroup, jobSet string) {
	driverClaims := ""
	if claim != "" {
		driverClaims = fmt.Sprintf(`
            resourceClaims:
            - name: dev
              resourceClaimName: %s`, claim)
	}
	containerClaims := ""
	if claim != "" {
		containerClaims = `
                claims:
                - name: dev`
	}
	rj := func(role string, replicas, pods, backoff int, podClaims, ctrClaims string) string {
		return fmt.Sprintf(`  - name: %[1]s
    replicas: %[2]d
    template:
      spec:
        parallelism: %[3]d
        completions: %[3]d
        backoffLimit: %[4]d
        template:
          metadata:
            labels:
              scheduling.x-k8s.io/pod-group: %[5]s
          spec:
            schedulerName: custom-scheduler
            restartPolicy: Never%[6]s
            containers:
            - name: %[1]s
              image: busybox
              command: ["sleep", "3600"]
              resources:
                requests: {cpu: "1", memory: 1Gi}%[7]s
`, role, replicas, pods, backoff, name, podClaims, ctrClaims)
	}
	podGroup = fmt.Sprintf("apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: %s\nspec:\n  minMember: 5\n", name)
	jobSet = fmt.Sprintf("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata:\n  name: %s\nspec:\n  replicatedJobs:\n%s%s",
		name, rj("driver", 1, 1, 0, driverClaims, containerClaims), rj("workers", 2, 2, backoffLimit, "", ""))
	return podGroup, jobSet
}

// lateDevice publishes one device on node for the test (a DeviceClass selecting a driver of the test's
// own, and a ResourceSlice of one device on node, as the driver would), both deleted when the test
// ends, and returns the class's name.
func lateDevice(t *testing.T, ns, node string) string {
	t.Helper()
	ctx := context.Background()
	driver, class := "late."+ns+".example.com", "late-"+ns+".example.com"
	dc := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", driver),
		}}}},
	}
	if _, err := client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating DeviceClass %s: %v", class, err)
	}
	t.Cleanup(func() {
		_ = client.ResourceV1().DeviceClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
			Devices:  []resourcev1.Device{{Name: "dev-0"}},
		},
	}
	if _, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceSlice %s: %v", slice.Name, err)
	}
	t.Cleanup(func() {
		if err := client.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting ResourceSlice %s: %v", slice.Name, err)
		}
	})
	return class
}

// boundPods are the group's pods that have a node, as "pod on node", sorted.
func boundPods(pods []v1.Pod) []string {
	var out []string
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			out = append(out, p.Name+" on "+p.Spec.NodeName)
		}
	}
	sort.Strings(out)
	return out
}

// TestJobSetLateQuorum: a gang whose quorum is reached late, so that Permit must hold the members
// placed first. The driver's pod asks for a ResourceClaim that does not exist yet (a claim made by
// something else, later): the scheduler's DynamicResources plugin keeps that pod out of the queue until
// the claim exists, while Coscheduling counts it as a member (it exists, live, ungated), so the gang
// passes PreEnqueue and the whole-gang check (which leaves a claim not created to the real filters).
// The 4 workers are reserved and wait at Permit (the PodGroup says WaitingForQuorum, 4 waiting, and gets
// the WaitingForQuorum event); none is bound, for longer than the gang invariant's grace. Then the claim
// is created: the driver is placed on the one node with the device, completes the quorum, and the 5 bind
// whole. With Permit letting every member through at once, the 4 workers would bind alone and this
// test and the gang invariant fail.
func TestJobSetLateQuorum(t *testing.T) {
	ns := testNamespace(t, "jobset-late")
	class := lateDevice(t, ns, "node-0")
	startJobSet(t, ns)
	ctx := context.Background()

	pg, js := quorumJobSet("late-gang", "late-dev", 0)
	createObject(t, podGroupGVR, ns, pg)
	createObject(t, jobSetGVR, ns, js)

	// The workers wait at Permit for the driver; nothing binds. A member bound now is reported once it
	// has stayed bound for longer than the invariant's grace (so the invariant reports it too).
	var firstBound time.Time
	waitFor(t, "PodGroup late-gang to say WaitingForQuorum with 4 members waiting at Permit", 60*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, "late-gang")
		if err != nil {
			return false, err
		}
		if bound := boundPods(pods); len(bound) > 0 {
			if firstBound.IsZero() {
				firstBound = time.Now()
			}
			if time.Since(firstBound) > bindGrace+time.Second {
				return false, fmt.Errorf("members bound while the driver's claim does not exist, before the gang's quorum: %v", bound)
			}
			return false, nil
		}
		p, err := getPodGroup(ctx, ns, "late-gang")
		if err != nil {
			return false, err
		}
		waiting, _, _ := unstructured.NestedInt64(p.Object, "status", "waiting")
		return len(pods) == 5 && waiting == 4 && strings.HasPrefix(podGroupReason(t, ns, "late-gang"), "WaitingForQuorum: 4 of minMember 5"), nil
	})
	t.Logf("PodGroup late-gang: %s", podGroupReason(t, ns, "late-gang"))
	// Still so past the invariant's grace: the attempt's WaitingForQuorum event comes 5 s after it started.
	t.Logf("PodGroup late-gang event: %s", waitEvent(t, ns, "late-gang", "WaitingForQuorum", "4 of minMember 5 members reserved or bound", 30*time.Second).Message)
	time.Sleep(time.Second)
	pods, err := groupPods(ctx, ns, "late-gang")
	if err != nil {
		t.Fatal(err)
	}
	if bound := boundPods(pods); len(bound) > 0 {
		t.Fatalf("members bound before the gang's quorum: %v", bound)
	}

	// The claim appears: the driver is placed where the device is, and the gang binds whole.
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "late-dev", Namespace: ns},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
		}}}},
	}
	if _, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceClaim %s/late-dev: %v", ns, err)
	}
	for _, p := range waitPlacedWhole(t, ns, "late-gang", 5) {
		if strings.Contains(p.Name, "-driver-") && p.Spec.NodeName != "node-0" {
			t.Errorf("driver %s bound to %s, want node-0 (the only node with the device)", p.Name, p.Spec.NodeName)
		}
	}
	got, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "late-dev", metav1.GetOptions{})
	if err != nil || got.Status.Allocation == nil || len(got.Status.ReservedFor) != 1 {
		t.Errorf("ResourceClaim late-dev: allocation %v, reservedFor %v (%v); want allocated and reserved for the driver", got.Status.Allocation, got.Status.ReservedFor, err)
	}

	if err := dyn.Resource(jobSetGVR).Namespace(ns).Delete(ctx, "late-gang", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNoPods(t, ns, "late-gang")
}

// TestJobSetReplacedMember: status.scheduled counts live members only. A worker of a gang bound whole
// fails (phase Failed; its Job's backoffLimit 1 lets the Job controller replace it, after its failure
// back-off of about 10 s, without failing the Job or the JobSet): the failed pod stays, bound, beside
// its replacement, which is placed alone and completes the quorum again. The PodGroup then says 5
// scheduled (the live members: 4 that stayed and the replacement), 1 failed, QuorumReached with 5 of
// minMember 5; a status that counted the failed pod would say 6.
func TestJobSetReplacedMember(t *testing.T) {
	ns := testNamespace(t, "jobset-replaced")
	startJobSet(t, ns)
	ctx := context.Background()

	pg, js := quorumJobSet("replaced-gang", "", 1)
	createObject(t, podGroupGVR, ns, pg)
	createObject(t, jobSetGVR, ns, js)
	var victim v1.Pod
	for _, p := range waitPlacedWhole(t, ns, "replaced-gang", 5) {
		if strings.Contains(p.Name, "-workers-") {
			victim = p
		}
	}
	markFailed(t, ns, victim.Name)

	// The Job replaces it; the failed pod stays, bound.
	waitFor(t, "the failed worker's replacement to be bound", 90*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, "replaced-gang")
		if err != nil {
			return false, err
		}
		failed, liveBound := 0, 0
		for _, p := range pods {
			if p.Status.Phase == v1.PodFailed && p.Spec.NodeName != "" {
				failed++
			}
			if liveAndBound(&p) {
				liveBound++
			}
		}
		return failed == 1 && liveBound == 5 && len(pods) == 6, nil
	})
	// A status written before the replacement was bound can say 5 scheduled too (on a build that counts
	// the failed pod: 4 live and the failed one), so the counts are read from a status that has seen
	// the replacement run: status.running 5 (live members only, whatever scheduled counts) and failed 1.
	var running, failed, scheduled int64
	var reason string
	if err := poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		p, err := getPodGroup(ctx, ns, "replaced-gang")
		if err != nil {
			return false, err
		}
		running, _, _ = unstructured.NestedInt64(p.Object, "status", "running")
		failed, _, _ = unstructured.NestedInt64(p.Object, "status", "failed")
		scheduled, _, _ = unstructured.NestedInt64(p.Object, "status", "scheduled")
		reason = podGroupReason(t, ns, "replaced-gang")
		return running == 5 && failed == 1, nil
	}); err != nil {
		t.Fatalf("waiting 30s for PodGroup replaced-gang to say running 5, failed 1: %v (last: running %d, failed %d, scheduled %d, %s)", err, running, failed, scheduled, reason)
	}
	if want := "QuorumReached: 5 of minMember 5 live members are bound or binding"; scheduled != 5 || !strings.HasPrefix(reason, want) {
		t.Errorf("PodGroup replaced-gang, running 5 and failed 1: scheduled %d, %s; want scheduled 5 (live members only), %q", scheduled, reason, want)
	}
	waitPlacedWhole(t, ns, "replaced-gang", 5)
	t.Logf("PodGroup replaced-gang: %s (scheduled %d, running %d, failed %d)", reason, scheduled, running, failed)

	if err := dyn.Resource(jobSetGVR).Namespace(ns).Delete(ctx, "replaced-gang", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNoPods(t, ns, "replaced-gang")
}
