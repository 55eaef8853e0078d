package integration

// A gang the device model admitted on a guess, refused by the real DynamicResources filter (issue #60,
// item 4). The whole-gang check gives upstream's allocator deviceCheckMilliseconds in all; a node it
// does not reach in time counts as holding the members (the check never refuses for lack of time).
// Here the budget is 1 ms and each node's count needs the allocator (each member asks two A100s in two
// requests; every node has 2 A100s, held by a low-priority pod, and 62 T4s free, so counting free
// devices cannot answer), so most nodes count as holding the gang: before, the gang was admitted,
// every member refused ("cannot allocate all claims"), and it backed off for ever while the
// low-priority pods kept the A100s. Now the failure records the nodes the filter refused it on, the
// next check gives up the relaxation there (the allocator answers, or the node holds none), finds the
// gang short, and its preemption evicts the holders whose A100s it needs.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// refusedNodes is how many device nodes the test makes: at 1 ms, the check's allocator reaches only
// a few of them (each count reads 64 devices for two requests).
const refusedNodes = 24

// withCoschedulingArg adds "key: value" to the Coscheduling args of every profile of profiles (the
// args are per scheduler: every profile must have the same).
func withCoschedulingArg(t *testing.T, profiles, key, value string) string {
	t.Helper()
	lines := strings.Split(profiles, "\n")
	var out []string
	n := 0
	for _, l := range lines {
		out = append(out, l)
		if trimmed := strings.TrimLeft(l, " "); strings.HasPrefix(trimmed, "podGroupBackoffSeconds:") {
			out = append(out, l[:len(l)-len(trimmed)]+key+": "+value)
			n++
		}
	}
	if n == 0 {
		t.Fatal("no Coscheduling args (podGroupBackoffSeconds) in the shipped profiles")
	}
	return strings.Join(out, "\n")
}

// modelClass creates a DeviceClass selecting the driver's devices whose model attribute is model.
func modelClass(t *testing.T, class, driver, model string) {
	t.Helper()
	dc := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q && device.attributes[%q].model == %q", driver, driver, model),
		}}}},
	}
	ctx := context.Background()
	if _, err := client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating DeviceClass %s: %v", class, err)
	}
	t.Cleanup(func() {
		if err := client.ResourceV1().DeviceClasses().Delete(ctx, class, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting DeviceClass %s: %v", class, err)
		}
	})
}

// publishModels publishes on node a100 devices of model a100, then t4 of model t4.
func (e draEnv) publishModels(t *testing.T, node string, a100, t4 int) {
	t.Helper()
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + e.driver},
		Spec: resourcev1.ResourceSliceSpec{Driver: e.driver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}},
	}
	for i := range a100 + t4 {
		model := "a100"
		if i >= a100 {
			model = "t4"
		}
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To(model)}}})
	}
	createSlice(t, slice)
}

// pairTemplate creates a ResourceClaimTemplate asking two devices of class, in two requests.
func (e draEnv) pairTemplate(t *testing.T, name, class string) {
	t.Helper()
	req := func(n string) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: n, Exactly: &resourcev1.ExactDeviceRequest{
			DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}
	}
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req("first"), req("second")}}}},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(e.ns).Create(context.Background(), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceClaimTemplate %s/%s: %v", e.ns, name, err)
	}
}

// TestDRARefusedDevicesPreempt: see the file's comment.
func TestDRARefusedDevicesPreempt(t *testing.T) {
	needControllerManager(t)
	ensurePriorityClasses(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, withCoschedulingArg(t, shippedProfiles(t), "deviceCheckMilliseconds", "1")))
	ns := testNamespace(t)
	e := draEnv{ns: ns, driver: "gpu." + ns + ".example.com", class: "a100-" + ns + ".example.com"}
	modelClass(t, e.class, e.driver, "a100")
	e.pairTemplate(t, "pair", e.class)
	var holders []string
	for i := range refusedNodes {
		node := fmt.Sprintf("%s-%d", ns, i)
		e.node(t, node, "8", "gang", 0, nil)
		e.publishModels(t, node, 2, 62)
		name := fmt.Sprintf("holder-%d", i)
		createPod(t, prio(e.claimPod(name, "", "1", "gang", "pair"), lowPriority, node))
		holders = append(holders, name)
	}
	for _, name := range holders {
		waitForDRAPodBound(t, ns, name, "a low-priority pod holding its node's two A100s")
	}
	evicted := kubeletDeletesPreempted(t, ns)

	hi := gangNames("hi", 2)
	watchNotPartial(t, ns, "hi", 2)
	createPodGroup(t, ns, "hi", 2, 0)
	start := time.Now()
	for _, name := range hi {
		createPod(t, prio(e.claimPod(name, "hi", "1", "gang", "pair"), highPriority, ""))
	}
	got := waitForDRAGangBound(t, ns, "hi", 2)
	t.Logf("hi bound whole on %v, %v after it was created; evicted %v", got, time.Since(start).Round(100*time.Millisecond), evicted())
	consistentlyNotPartial(t, ns, "hi", 2)
	for _, name := range evicted() {
		if !strings.HasPrefix(name, "holder-") {
			t.Errorf("pod %s was evicted; only the low-priority holders may be", name)
		}
	}
	if n := len(evicted()); n != 2 {
		t.Errorf("%d holders evicted (%v), want 2: the gang needs four A100s, and each holder holds two", n, evicted())
	}
	if events, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == "hi" {
				t.Logf("hi: %s x%d: %.200s", ev.Reason, ev.Count, ev.Message)
			}
		}
	}
	// The relaxation was used: an attempt was admitted and refused by the real filter first.
	ev := waitForEvent(t, ns, "hi", podgroup.ReasonGangRejected, schedulerName)
	if !strings.Contains(ev.Message, "the DynamicResources plugin refused it on") {
		t.Errorf("hi's GangRejected event %q does not name the nodes the DynamicResources plugin refused", ev.Message)
	}
}
