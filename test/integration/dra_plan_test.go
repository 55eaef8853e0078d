package integration

// Gangs with ResourceClaims beyond the whole-gang check (dra_test.go): the placement plan places
// members whose claims the device model counts, a reservation holds the devices its members wait
// for, and members that share one claim are placed whole or held whole.
//
// Which cases need the changes they were written with (before them, these fail):
//   - TestDRAClaimGangPlanned: members with ResourceClaims were never planned (every node offered), so
//     the plan's metric counted none of them.
//   - TestDRAReservationHoldsDevices: a reservation held CPU and memory only (the DynamicResources
//     plugin does not see nominated pods' claims), so a stream of device pods took every device that
//     freed and the gang, which needs them all at once, was starved past the test's deadline.
//   - TestDRASharedClaimGang records what the real filters do with a claim that several members share
//     (not modelled), and TestDRAPartitionedDeviceGang that partitions of one device are counted as
//     the allocator counts them: both pass on either code.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestDRAClaimGangPlanned: 4 members with a claim each from a ResourceClaimTemplate (one device); two
// nodes with 2 devices, two with none, all with room for every member's CPU. The plan places the gang
// on the device nodes (their devices hold 2 members each), every member goes through the plan (the
// metric's "placed", no fallback), and the gang binds whole there.
func TestDRAClaimGangPlanned(t *testing.T) {
	needControllerManager(t)
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, false)
	e.claimTemplate(t, "gpu")
	e.node(t, ns+"-lone", "8", "lone", 1, nil)
	devices := map[string]bool{}
	for i := range 4 {
		n, count := fmt.Sprintf("%s-%d", ns, i), 0
		if i%2 == 1 {
			count = 2
			devices[n] = true
		}
		e.node(t, n, "8", "gang", count, nil)
	}
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	createPod(t, e.claimPod("lone", "", "1", "lone", "gpu"))
	waitForDRAPodBound(t, ns, "lone", "a pod of no gang with a claim from the template (the DRA set-up and the resourceclaim controller)")

	placed, fallback := planCounter(t, schedulerName, "placed"), planCounter(t, schedulerName, "fallback")
	watchWhole(t, ns, "train", 4, nil)
	createPodGroup(t, ns, "train", 4, 0)
	for i := range 4 {
		createPod(t, e.claimPod(fmt.Sprintf("train-%d", i), "train", "1", "gang", "gpu"))
	}
	nodes := waitForDRAGangBound(t, ns, "train", 4)
	perNode := map[string]int{}
	for pod, n := range nodes {
		perNode[n]++
		if !devices[n] {
			t.Errorf("member %s is on %s, a node without devices", pod, n)
		}
	}
	if len(perNode) != 2 {
		t.Errorf("members per node %v, want 2 on each device node", perNode)
	}
	gotPlaced := planCounter(t, schedulerName, "placed") - placed
	gotFallback := planCounter(t, schedulerName, "fallback") - fallback
	t.Logf("members per node %v; placed through the plan %v, fallbacks %v", perNode, gotPlaced, gotFallback)
	if gotPlaced != 4 || gotFallback != 0 {
		t.Errorf("plan metric: %v members placed through the plan and %v fallbacks, want 4 and 0", gotPlaced, gotFallback)
	}
}

// TestDRAReservationHoldsDevices is "a reservation for a device gang": two nodes of 2 devices each kept
// busy by a stream of pods of no gang that take one device each (one every 500 ms, each running about
// 4 s, so more want devices than there are), then a gang of 4 members that needs all 4 devices at
// once. It waits, reserves (reservation.afterSeconds 2), its plan counts the devices the stream's pods
// will free, and from then on the stream's pods are kept off the held devices: the gang is placed whole
// as soon as they are free. Without the hold on devices every device that frees goes to the next pod
// of the stream, and the gang is never placed.
func TestDRAReservationHoldsDevices(t *testing.T) {
	needControllerManager(t)
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, false)
	e.claimTemplate(t, "gpu")
	for i := range 2 {
		e.node(t, fmt.Sprintf("%s-%d", ns, i), "8", "gang", 2, nil)
	}
	startScheduler(t, schedulerConfig(t, adminKubeconfig, fastReservation(t, "60")))

	s := startPodStream(t, ns, "", func(i int) *v1.Pod {
		return e.claimPod(fmt.Sprintf("small-%d", i), "", "1", "gang", "gpu")
	}, 500*time.Millisecond, 4*time.Second)
	waitFor(t, ns, "the stream's pods to hold devices", func(context.Context) (bool, error) {
		return s.boundBetween(time.Time{}, time.Now()) >= 4, nil
	})
	arrival := time.Now()
	watchNotPartial(t, ns, "big", 4)
	createPodGroup(t, ns, "big", 4, 0)
	for i := range 4 {
		createPod(t, e.claimPod(fmt.Sprintf("big-%d", i), "big", "1", "gang", "gpu"))
	}

	waitForEvent(t, ns, "big", podgroup.ReasonReserved, schedulerName)
	reservedAt := time.Now()
	c := waitForPodGroupConditionOf(t, ns, "big", "Reserved", "RoomHeld")
	t.Logf("reserved %v after the gang came: %s", reservedAt.Sub(arrival).Round(100*time.Millisecond), c.Message)
	if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "the devices of 4 members") {
		t.Errorf("Reserved condition %s %q, want True and the devices of 4 members held", c.Status, c.Message)
	}

	deadline := arrival.Add(90 * time.Second)
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Until(deadline), true, func(ctx context.Context) (bool, error) {
		n, err := boundMembers(ctx, ns, "big")
		return n == 4, err
	}); err != nil {
		t.Fatalf("the device gang was not placed within 90 s of its arrival (reserved %v after it)\n%s", reservedAt.Sub(arrival), dumpNamespace(ns))
	}
	placed := time.Now()
	t.Logf("gang arrived, reserved after %v, placed after %v", reservedAt.Sub(arrival).Round(100*time.Millisecond), placed.Sub(arrival).Round(100*time.Millisecond))
	consistentlyNotPartial(t, ns, "big", 4)
	waitForPodGroupConditionOf(t, ns, "big", "Reserved", "QuorumReached")
	if got, err := preempted(context.Background(), ns); err != nil || len(got) > 0 {
		t.Errorf("a reservation evicted %v (err %v): it must never evict", got, err)
	}
	// The held devices were not taken: no pod of the stream was bound once the hold was in force (a
	// second after the reservation, for the cycles already past their filters) until the gang was.
	if n := s.boundBetween(reservedAt.Add(time.Second), placed); n > 0 {
		t.Errorf("%d pods of the stream were bound while the reservation held every device", n)
	}
	// And a kept-off pod says why.
	want := "devices on the node are held for PodGroup " + ns + "/big"
	waitFor(t, ns, "a stream pod's FailedScheduling to name the held devices", func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if strings.HasPrefix(ev.InvolvedObject.Name, "small-") && strings.Contains(ev.Message, want) {
				t.Logf("kept off: %s", ev.Message)
				return true, nil
			}
		}
		return false, nil
	})
	// The stream goes on once the gang is done.
	forceDelete(t, ns, gangNames("big", 4)...)
	waitFor(t, ns, "stream pods placed again after the gang", func(context.Context) (bool, error) {
		return s.boundBetween(placed, time.Now()) >= 2, nil
	})
}

// TestDRASharedClaimGang: members that share one ResourceClaim (named in every member's
// spec.resourceClaims). The device model does not count a shared claim; what the real filters do:
//   - a claim allocated already (a pod of no gang took it first) pins every member to its node, where
//     the gang is placed whole, every member reserving the claim;
//   - a claim not allocated yet cannot be shared by a Permit-based gang: the first member's
//     allocation stays in flight while it waits for the others at Permit, and DynamicResources refuses
//     every other member meanwhile ("is in the process of being allocated"). The gang is held whole:
//     no member binds.
func TestDRASharedClaimGang(t *testing.T) {
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, false)
	for i := range 2 {
		e.node(t, fmt.Sprintf("%s-a%d", ns, i), "8", "a", 1, nil)
		e.node(t, fmt.Sprintf("%s-b%d", ns, i), "8", "b", 1, nil)
	}
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	claim := func(name string) {
		c := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name:    "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: e.class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
			}}}},
		}
		if _, err := client.ResourceV1().ResourceClaims(ns).Create(context.Background(), c, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating ResourceClaim %s: %v", name, err)
		}
	}
	sharing := func(name, group, role, claimName string) *v1.Pod {
		p := e.pod(name, group, "1", role)
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claimName)}}
		p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
		return p
	}

	// Allocated first: a pod of no gang takes the claim, then the gang shares it on that node.
	claim("pre")
	createPod(t, sharing("first", "", "b", "pre"))
	node := waitForDRAPodBound(t, ns, "first", "a pod of no gang with the claim the gang shares")
	watchWhole(t, ns, "pinned", 3, nil)
	createPodGroup(t, ns, "pinned", 3, 0)
	for i := range 3 {
		createPod(t, sharing(fmt.Sprintf("pinned-%d", i), "pinned", "b", "pre"))
	}
	nodes := waitForDRAGangBound(t, ns, "pinned", 3)
	for pod, n := range nodes {
		if n != node {
			t.Errorf("member %s is on %s, not on %s where the shared claim is allocated", pod, n, node)
		}
	}
	c, err := client.ResourceV1().ResourceClaims(ns).Get(context.Background(), "pre", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, r := range c.Status.ReservedFor {
		users = append(users, r.Name)
	}
	t.Logf("shared claim allocated on %s, reserved for %v; members on %v", node, users, nodes)
	if len(c.Status.ReservedFor) != 4 {
		t.Errorf("the shared claim is reserved for %v, want the first pod and the 3 members", users)
	}

	// Not allocated yet: the gang is held whole, never partly bound.
	claim("fresh")
	watchWhole(t, ns, "fresh", 3, nil)
	createPodGroup(t, ns, "fresh", 3, 0)
	for i := range 3 {
		createPod(t, sharing(fmt.Sprintf("fresh-%d", i), "fresh", "a", "fresh"))
	}
	consistentlyNoneBound(t, 20*time.Second, ns, "fresh")
	pods, err := groupPods(context.Background(), ns, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodScheduled {
				t.Logf("%s: PodScheduled=%s %s: %s", p.Name, cond.Status, cond.Reason, cond.Message)
			}
		}
	}
}

// partitionedNode creates a node of 8 CPUs whose one physical GPU the driver publishes as 8
// partitions (devices gpu-0-p<i>) that each consume 2 of its 8 "slices" (a counter set): at most 4
// partitions are allocated at once, however many are listed. Two ResourceSlices in one pool, as
// DRAPartitionableDevices wants: the counters in one, the devices in the other.
func (e draEnv) partitionedNode(t *testing.T, name, role string) {
	t.Helper()
	createNode(t, name, "8", "16Gi", map[string]string{draCaseLabel: e.ns + "-" + role, v1.LabelHostname: name})
	pool := resourcev1.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 2}
	counters := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-counters-" + e.driver},
		Spec: resourcev1.ResourceSliceSpec{Driver: e.driver, Pool: pool, NodeName: ptr.To(name),
			SharedCounters: []resourcev1.CounterSet{{Name: "gpu-0", Counters: map[string]resourcev1.Counter{"slices": {Value: resource.MustParse("8")}}}}},
	}
	devices := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-devices-" + e.driver},
		Spec:       resourcev1.ResourceSliceSpec{Driver: e.driver, Pool: pool, NodeName: ptr.To(name)},
	}
	for i := range 8 {
		devices.Spec.Devices = append(devices.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-0-p%d", i),
			ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0",
				Counters: map[string]resourcev1.Counter{"slices": {Value: resource.MustParse("2")}}}},
		})
	}
	ctx := context.Background()
	for _, s := range []*resourcev1.ResourceSlice{counters, devices} {
		created, err := client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating ResourceSlice %s: %v", s.Name, err)
		}
		if len(created.Spec.SharedCounters) != len(s.Spec.SharedCounters) || (len(s.Spec.Devices) > 0 && len(created.Spec.Devices[0].ConsumesCounters) == 0) {
			t.Fatalf("the apiserver dropped the counters of ResourceSlice %s: DRAPartitionableDevices is not served", s.Name)
		}
		t.Cleanup(func() {
			if err := client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting ResourceSlice %s: %v", s.Name, err)
			}
		})
	}
}

// TestDRAPartitionedDeviceGang: members that take partitions of one device (DRAPartitionableDevices,
// beta and on by default since 1.36). Each of two nodes lists 8 partitions of its one GPU, of which
// the GPU's counters let 4 be allocated at once. A gang of 4, a partition each, is placed whole on one
// node (the whole-gang check and the plan count what the counters allow, through the same allocator as
// DynamicResources); a gang of 5 on the other is refused whole, the verdict saying the free devices
// hold 4 of the 5 members (not the 8 partitions listed), and nothing of it binds.
func TestDRAPartitionedDeviceGang(t *testing.T) {
	needControllerManager(t)
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, false)
	e.claimTemplate(t, "gpu")
	e.partitionedNode(t, ns+"-a", "a")
	e.partitionedNode(t, ns+"-b", "b")
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	watchWhole(t, ns, "four", 4, nil)
	createPodGroup(t, ns, "four", 4, 0)
	for i := range 4 {
		createPod(t, e.claimPod(fmt.Sprintf("four-%d", i), "four", "1", "a", "gpu"))
	}
	nodes := waitForDRAGangBound(t, ns, "four", 4)
	if distinct(nodes) != 1 {
		t.Errorf("members on %v, want all on %s-a", nodes, ns)
	}
	claims, err := client.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var partitions []string
	for _, c := range claims.Items {
		if c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				partitions = append(partitions, r.Pool+"/"+r.Device)
			}
		}
	}
	t.Logf("the gang of 4 holds partitions %v", partitions)
	if len(partitions) != 4 {
		t.Errorf("%d partitions allocated, want 4 (one a member)", len(partitions))
	}

	watchWhole(t, ns, "five", 5, nil)
	createPodGroup(t, ns, "five", 5, 0)
	for i := range 5 {
		createPod(t, e.claimPod(fmt.Sprintf("five-%d", i), "five", "1", "b", "gpu"))
	}
	c := waitForPodGroupCondition(t, ns, "five", podgroup.ReasonGangInfeasible)
	t.Logf("gang of 5: %s", c.Message)
	if !strings.Contains(c.Message, "hold 4 of the 5 members") {
		t.Errorf("GangInfeasible %q does not say the free devices hold 4 of the 5 members", c.Message)
	}
	consistentlyNoneBound(t, 5*time.Second, ns, "five")
}
