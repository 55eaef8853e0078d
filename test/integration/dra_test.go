package integration

// Gangs whose members get their GPUs through Dynamic Resource Allocation (resource.k8s.io/v1): devices
// published in ResourceSlices, asked for either as a DRA-backed extended resource (a DeviceClass with
// spec.extendedResourceName; the resource never appears in node allocatable) or through a
// ResourceClaimTemplate. The scheduler's own DynamicResources plugin allocates; Coscheduling must
// place the gang whole, and its whole-gang check and its choice of a required domain must count the
// devices, not node allocatable or CPU alone.
//
// Which cases need the device-aware whole-gang check (written separately; before it, these fail):
//   - TestDRAExtendedResourceGang: the check reads the extended resource from node allocatable (0)
//     and refuses the gang for ever ("GangInfeasible ... fit only 0 of them").
//   - TestDRARequiredRackDevices: the same refusal; once resources are read from the devices, the rack
//     must also be chosen by devices, not by the tightest CPU fit.
//   - TestDRAClaimTemplateGang: the check ignores claims and picks the required rack by CPU alone
//     (the tighter rack without devices), where no member can get a device: nothing ever binds.
//   - TestDRATooFewDevices holds no member today too; only its message assertion (the GangInfeasible
//     message names the device class) needs the fix.
//   - TestDRAShortfallDeviceRows: the shortfall's device row had its numbers but no class, unit or
//     node, a required rack's domains no devices, and that GangInfeasible event no class.
// The lone (non-gang) pods in these tests check the DRA set-up itself and pass either way.

import (
	"context"
	"fmt"
	"slices"
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

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// draCaseLabel confines a DRA test's pods to its own nodes: value <ns>-gang for the gang's nodes,
// <ns>-lone for the node of the set-up check's lone pod.
const draCaseLabel = "custom-scheduler.test/dra-case"

// draEnv is one test's DRA set-up: a driver, a DeviceClass selecting its devices and, when the class
// has one, the DRA-backed extended resource name. All names are unique to the test's namespace.
type draEnv struct {
	ns       string
	driver   string
	class    string
	extended v1.ResourceName // "" when the class has no extendedResourceName
}

// newDRAEnv creates the test's DeviceClass (deleted when the test ends), with
// spec.extendedResourceName <ns>.example.com/gpu when extended is set.
func newDRAEnv(t *testing.T, ns string, extended bool) draEnv {
	t.Helper()
	env := draEnv{ns: ns, driver: "gpu." + ns + ".example.com", class: "gpu-" + ns + ".example.com"}
	if extended {
		env.extended = v1.ResourceName(ns + ".example.com/gpu")
	}
	createDeviceClass(t, env.class, env.driver, env.extended)
	return env
}

// createDeviceClass creates a DeviceClass selecting every device of driver (deleted when the test
// ends), with spec.extendedResourceName extended unless that is "".
func createDeviceClass(t *testing.T, class, driver string, extended v1.ResourceName) {
	t.Helper()
	dc := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == %q", driver),
			}}},
		},
	}
	if extended != "" {
		dc.Spec.ExtendedResourceName = ptr.To(string(extended))
	}
	ctx := context.Background()
	created, err := client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating DeviceClass %s: %v", class, err)
	}
	t.Cleanup(func() {
		if err := client.ResourceV1().DeviceClasses().Delete(ctx, class, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting DeviceClass %s: %v", class, err)
		}
	})
	if extended != "" && ptr.Deref(created.Spec.ExtendedResourceName, "") != string(extended) {
		t.Fatalf("the apiserver dropped DeviceClass %s's spec.extendedResourceName (got %v): DRAExtendedResource is not served",
			class, created.Spec.ExtendedResourceName)
	}
}

// node creates a node with the given CPUs and labels plus draCaseLabel=<ns>-<role> and its hostname,
// and publishes devices GPUs on it (none when 0) as the driver would (see publish). Everything is
// deleted when the test ends.
func (e draEnv) node(t *testing.T, name, cpu, role string, devices int, labels map[string]string) {
	t.Helper()
	l := map[string]string{draCaseLabel: e.ns + "-" + role, v1.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	createNode(t, name, cpu, "16Gi", l)
	if devices > 0 {
		e.publish(t, name, devices)
	}
}

// publish publishes devices GPUs gpu-0, gpu-1, ... on node as the driver would: one ResourceSlice,
// pool named after the node. It returns the slice's name; the slice is deleted when the test ends
// (if it is still there).
func (e draEnv) publish(t *testing.T, node string, devices int) string {
	t.Helper()
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + e.driver},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   e.driver,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
		},
	}
	for i := range devices {
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	createSlice(t, slice)
	return slice.Name
}

// createSlice creates a ResourceSlice, deleted when the test ends (if it is still there).
func createSlice(t *testing.T, slice *resourcev1.ResourceSlice) {
	t.Helper()
	ctx := context.Background()
	if _, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceSlice %s: %v", slice.Name, err)
	}
	t.Cleanup(func() {
		if err := client.ResourceV1().ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting ResourceSlice %s: %v", slice.Name, err)
		}
	})
}

// extPod is a pod on the test's <role> nodes asking cpu and one of the DRA-backed extended resource
// (requests and limits, as extended resources must); group "" for a pod of no gang.
func (e draEnv) extPod(name, group, cpu, role string) *v1.Pod {
	p := e.pod(name, group, cpu, role)
	c := &p.Spec.Containers[0]
	one := resource.MustParse("1")
	c.Resources.Requests[e.extended] = one
	if c.Resources.Limits == nil {
		c.Resources.Limits = v1.ResourceList{}
	}
	c.Resources.Limits[e.extended] = one
	return p
}

// claimPod is a pod on the test's <role> nodes asking cpu and a claim from the ResourceClaimTemplate
// tmpl; group "" for a pod of no gang.
func (e draEnv) claimPod(name, group, cpu, role, tmpl string) *v1.Pod {
	p := e.pod(name, group, cpu, role)
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl)}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	return p
}

func (e draEnv) pod(name, group, cpu, role string) *v1.Pod {
	p := gangPod(e.ns, name, group, cpu)
	if group == "" {
		delete(p.Labels, v1alpha1.PodGroupLabel)
	}
	p.Spec.NodeSelector = map[string]string{draCaseLabel: e.ns + "-" + role}
	return p
}

// claimTemplate creates a ResourceClaimTemplate asking exactly one device of the class.
func (e draEnv) claimTemplate(t *testing.T, name string) {
	t.Helper()
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: e.class,
					AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
					Count:           1,
				},
			}}},
		}},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(e.ns).Create(context.Background(), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceClaimTemplate %s/%s: %v", e.ns, name, err)
	}
}

// loneExtPodBinds checks the DRA set-up apart from any gang: a pod of no gang asking one of the
// extended resource binds on the test's lone node, and the scheduler wrote its claim.
func (e draEnv) loneExtPodBinds(t *testing.T) {
	t.Helper()
	createPod(t, e.extPod("lone", "", "1", "lone"))
	waitForDRAPodBound(t, e.ns, "lone", "a pod of no gang asking one "+string(e.extended)+" (the DRA set-up itself)")
	pod, err := client.CoreV1().Pods(e.ns).Get(context.Background(), "lone", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.ExtendedResourceClaimStatus == nil || pod.Status.ExtendedResourceClaimStatus.ResourceClaimName == "" {
		t.Errorf("lone pod bound without status.extendedResourceClaimStatus: %+v", pod.Status)
	}
}

// waitForDRAPodBound waits until the pod has a node and returns it; on timeout it fails with the
// pod's PodScheduled condition, so a broken DRA set-up says so.
func waitForDRAPodBound(t *testing.T, ns, name, what string) string {
	t.Helper()
	var pod *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Spec.NodeName != "", nil
	})
	if err != nil {
		var cond string
		if pod != nil {
			for _, c := range pod.Status.Conditions {
				if c.Type == v1.PodScheduled {
					cond = fmt.Sprintf("%s=%s reason=%s message=%q", c.Type, c.Status, c.Reason, c.Message)
				}
			}
		}
		t.Fatalf("%s: pod %s/%s not bound within %v: %v; PodScheduled: %s", what, ns, name, waitTimeout, err, cond)
	}
	return pod.Spec.NodeName
}

// waitForDRAGangBound waits until want members of the group are bound and returns the members' nodes
// by pod name; on timeout it fails with the PodGroup's conditions (the gang check's verdict).
func waitForDRAGangBound(t *testing.T, ns, group string, want int) map[string]string {
	t.Helper()
	var nodes map[string]string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, group)
		if err != nil {
			return false, err
		}
		nodes = map[string]string{}
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				nodes[p.Name] = p.Spec.NodeName
			}
		}
		return len(nodes) == want, nil
	})
	if err != nil {
		var conds []string
		for _, c := range getPodGroup(t, ns, group).Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s reason=%s message=%q", c.Type, c.Status, c.Reason, c.Message))
		}
		t.Fatalf("PodGroup %s/%s: %d of %d members bound after %v (%v); conditions:\n  %s",
			ns, group, len(nodes), want, waitTimeout, nodes, strings.Join(conds, "\n  "))
	}
	return nodes
}

// distinct counts the distinct values.
func distinct(m map[string]string) int {
	seen := map[string]bool{}
	for _, v := range m {
		seen[v] = true
	}
	return len(seen)
}

// rackNodes creates, per rack of a DRA rack test, its nodes: rack <ns>-a holds 2 nodes of 2 CPUs
// and no device (the tightest CPU fit for 4 one-CPU members: nothing left over), rack <ns>-b 4
// nodes of 4 CPUs with one device each. A CPU-only best fit picks rack a; only rack b has devices.
func (e draEnv) rackNodes(t *testing.T) (rackA, rackB string) {
	t.Helper()
	rackA, rackB = e.ns+"-a", e.ns+"-b"
	for i := range 2 {
		e.node(t, fmt.Sprintf("%s-%d", rackA, i), "2", "gang", 0, map[string]string{rackLabel: rackA})
	}
	for i := range 4 {
		e.node(t, fmt.Sprintf("%s-%d", rackB, i), "4", "gang", 1, map[string]string{rackLabel: rackB})
	}
	return rackA, rackB
}

// checkOneRack fails the test unless every node in nodes carries rack want.
func checkOneRack(t *testing.T, nodes map[string]string, want string) {
	t.Helper()
	for pod, name := range nodes {
		n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Labels[rackLabel]; got != want {
			t.Errorf("member %s is on %s in rack %q, want rack %q (the one with devices)", pod, name, got, want)
		}
	}
}

// TestDRAExtendedResourceGang: 4 nodes with one GPU each, published by a DRA driver and asked for
// as a DRA-backed extended resource; a gang of 4 members asking one GPU each is bound whole, one
// member per node.
func TestDRAExtendedResourceGang(t *testing.T) {
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, true)
	e.node(t, ns+"-lone", "8", "lone", 1, nil)
	for i := range 4 {
		e.node(t, fmt.Sprintf("%s-%d", ns, i), "8", "gang", 1, nil)
	}
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	// The DRA set-up first, apart from the gang check.
	e.loneExtPodBinds(t)

	watchWhole(t, ns, "train", 4, nil)
	createPodGroup(t, ns, "train", 4, 0)
	for i := range 4 {
		createPod(t, e.extPod(fmt.Sprintf("train-%d", i), "train", "1", "gang"))
	}
	nodes := waitForDRAGangBound(t, ns, "train", 4)
	if distinct(nodes) != 4 {
		t.Errorf("members landed on %v, want 4 nodes (one device each)", nodes)
	}
	for name := range nodes {
		pod, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.ExtendedResourceClaimStatus == nil {
			t.Errorf("member %s bound without status.extendedResourceClaimStatus", name)
		}
	}
}

// TestDRARequiredRackDevices: a gang with a required rack, whose members ask a DRA-backed extended
// resource, goes to the rack with the devices, not to the rack a CPU-only best fit prefers.
func TestDRARequiredRackDevices(t *testing.T) {
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, true)
	_, rackB := e.rackNodes(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	watchWhole(t, ns, "train", 4, nil)
	watchOneDomain(t, ns, "train", rackLabel)
	createTopologyPodGroup(t, ns, "train", 4, map[string]any{"required": rackLabel})
	for i := range 4 {
		createPod(t, e.extPod(fmt.Sprintf("train-%d", i), "train", "1", "gang"))
	}
	nodes := waitForDRAGangBound(t, ns, "train", 4)
	checkOneRack(t, nodes, rackB)
	if distinct(nodes) != 4 {
		t.Errorf("members landed on %v, want 4 nodes (one device each)", nodes)
	}
	c := waitForPodGroupConditionOf(t, ns, "train", "Topology", "RequiredDomain")
	if !strings.Contains(c.Message, rackLabel+"="+rackB) {
		t.Errorf("Topology condition %q does not name rack %s", c.Message, rackB)
	}
}

// TestDRATooFewDevices: 3 devices for a gang of 4 members asking one each: nothing is bound, the
// verdict names the device class, and the devices stay free for a pod of no gang.
func TestDRATooFewDevices(t *testing.T) {
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, true)
	for i := range 3 {
		e.node(t, fmt.Sprintf("%s-%d", ns, i), "8", "gang", 1, nil)
	}
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	watchWhole(t, ns, "train", 4, nil)
	createPodGroup(t, ns, "train", 4, 0)
	for i := range 4 {
		createPod(t, e.extPod(fmt.Sprintf("train-%d", i), "train", "1", "gang"))
	}
	c := waitForPodGroupCondition(t, ns, "train", podgroup.ReasonGangInfeasible)
	if !strings.Contains(c.Message, e.class) {
		t.Errorf("GangInfeasible condition %q does not name the device class %s", c.Message, e.class)
	}
	ev := waitForEvent(t, ns, "train", podgroup.ReasonGangInfeasible, schedulerName)
	t.Logf("GangInfeasible event: %s", ev.Message)
	// Three devices are free all along: none of them is taken by a part of the gang.
	consistentlyNoneBound(t, 10*time.Second, ns, "train")
	// And the gang holds none of them: a pod of no gang asking one binds (before the shipped
	// reservation's afterSeconds, 30 s).
	createPod(t, e.extPod("lone", "", "1", "gang"))
	waitForDRAPodBound(t, ns, "lone", "a pod of no gang asking one of the 3 free devices")
	consistentlyNoneBound(t, 2*time.Second, ns, "train")
}

// TestDRAClaimTemplateGang: members asking a device through a ResourceClaimTemplate (claims made by
// the resourceclaim controller), with a required rack: the gang goes whole to the rack with the
// devices, not to the tighter CPU fit without any.
func TestDRAClaimTemplateGang(t *testing.T) {
	needControllerManager(t)
	if !slices.Contains(testControllers, "resourceclaim-controller") {
		t.Fatal("testControllers lacks resourceclaim-controller: no claim would be made from the template")
	}
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, false)
	e.claimTemplate(t, "gpu")
	e.node(t, ns+"-lone", "8", "lone", 1, nil)
	_, rackB := e.rackNodes(t)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	// The set-up first: the controller makes a claim from the template and a pod of no gang gets it.
	createPod(t, e.claimPod("lone", "", "1", "lone", "gpu"))
	waitForDRAPodBound(t, ns, "lone", "a pod of no gang with a claim from the template (the DRA set-up and the resourceclaim controller)")

	watchWhole(t, ns, "train", 4, nil)
	watchOneDomain(t, ns, "train", rackLabel)
	createTopologyPodGroup(t, ns, "train", 4, map[string]any{"required": rackLabel})
	for i := range 4 {
		createPod(t, e.claimPod(fmt.Sprintf("train-%d", i), "train", "1", "gang", "gpu"))
	}
	nodes := waitForDRAGangBound(t, ns, "train", 4)
	checkOneRack(t, nodes, rackB)
	if distinct(nodes) != 4 {
		t.Errorf("members landed on %v, want 4 nodes (one device each)", nodes)
	}
	// Every member's claim is allocated and reserved for it.
	claims, err := client.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allocated := map[string]bool{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			allocated[r.Name] = true
		}
	}
	for name := range nodes {
		if !allocated[name] {
			t.Errorf("member %s is bound but no allocated claim is reserved for it", name)
		}
	}
}

// TestDRAWaitingForClaims: members enter together once minMember of them have their claims from
// templates made. One member's template does not exist yet, so the resourceclaim controller cannot
// make its claim: its peers are held back (WaitingForClaims, counting the members whose claims are
// made) instead of being placed one by one around a member the check cannot count, and nothing binds.
// Once the template exists, the controller makes the claim and the gang is placed whole.
func TestDRAWaitingForClaims(t *testing.T) {
	needControllerManager(t)
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, false)
	e.claimTemplate(t, "gpu")
	for i := range 3 {
		e.node(t, fmt.Sprintf("%s-%d", ns, i), "8", "gang", 1, nil)
	}
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	watchWhole(t, ns, "train", 3, nil)
	createPodGroup(t, ns, "train", 3, 0)
	createPod(t, e.claimPod("train-0", "train", "1", "gang", "gpu"))
	createPod(t, e.claimPod("train-1", "train", "1", "gang", "gpu"))
	createPod(t, e.claimPod("train-2", "train", "1", "gang", "late-gpu"))
	ev := waitForEvent(t, ns, "train-0", podgroup.ReasonWaitingForClaims, schedulerName)
	if !strings.Contains(ev.Message, "2 of minMember 3 live pods of PodGroup "+ns+"/train have their ResourceClaims from templates made") {
		t.Errorf("WaitingForClaims event %q, want it to count the 2 members whose claims are made", ev.Message)
	}
	consistentlyNoneBound(t, 2*time.Second, ns, "train")

	e.claimTemplate(t, "late-gpu")
	if nodes := waitForDRAGangBound(t, ns, "train", 3); distinct(nodes) != 3 {
		t.Errorf("members landed on %v, want 3 nodes (one device each)", nodes)
	}
}

// deviceRow is the shortfall's row for the device kind of class (devices/<class>), or nil.
func deviceRow(s *v1alpha1.PodGroupShortfall, class string) *v1alpha1.ResourceShortfall {
	if s == nil {
		return nil
	}
	for i := range s.Resources {
		if s.Resources[i].Name == v1.ResourceName("devices/"+class) {
			return &s.Resources[i]
		}
	}
	return nil
}

// waitForDeviceShortfall waits until the PodGroup's status.shortfall has the device row of the
// test's class with Requested want, and returns the shortfall; on timeout it fails with what the
// status said.
func (e draEnv) waitForDeviceShortfall(t *testing.T, group string, want int64) *v1alpha1.PodGroupShortfall {
	t.Helper()
	var last *v1alpha1.PodGroupShortfall
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		last = getPodGroup(t, e.ns, group).Status.Shortfall
		r := deviceRow(last, e.class)
		return r != nil && r.Requested.Value() == want, nil
	})
	if err != nil {
		t.Fatalf("PodGroup %s/%s: no shortfall row devices/%s asking %d members within %v; status.shortfall: %+v", e.ns, group, e.class, want, waitTimeout, last)
	}
	return last
}

// TestDRAShortfallDeviceRows: a gang that lacks devices says so in numbers. 4 members asking one
// device each where 3 nodes hold 1, 2 and 0: status.shortfall has the row devices/<class> with its
// DeviceClass, in unit Members (4 requested, 3 free, 1 a member, 2 on the roomiest node, which it
// names); the GangInfeasible event names the class. With a required rack, each listed rack says how
// many members' claims its devices hold.
func TestDRAShortfallDeviceRows(t *testing.T) {
	ns := testNamespace(t)
	e := newDRAEnv(t, ns, true)
	rackA, rackB := ns+"-a", ns+"-b"
	e.node(t, ns+"-0", "8", "gang", 1, map[string]string{rackLabel: rackA})
	e.node(t, ns+"-1", "8", "gang", 2, map[string]string{rackLabel: rackB})
	e.node(t, ns+"-2", "8", "gang", 0, map[string]string{rackLabel: rackB})
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	// Anywhere: the nodes' devices hold 3 of the 4 members.
	watchWhole(t, ns, "train", 4, nil)
	createPodGroup(t, ns, "train", 4, 0)
	for i := range 4 {
		createPod(t, e.extPod(fmt.Sprintf("train-%d", i), "train", "1", "gang"))
	}
	s := e.waitForDeviceShortfall(t, "train", 4)
	for _, row := range s.Resources {
		t.Logf("train shortfall %s: %s requested=%s free=%s member=%s largestFree=%s class=%q unit=%q largestFreeNode=%q", s.Reason, row.Name,
			row.Requested.String(), row.Free.String(), row.Member.String(), row.LargestFree.String(), row.DeviceClass, row.Unit, row.LargestFreeNode)
	}
	r := deviceRow(s, e.class)
	if r.DeviceClass != e.class || r.Unit != v1alpha1.ShortfallUnitMembers {
		t.Errorf("device row class %q unit %q, want %q and %q", r.DeviceClass, r.Unit, e.class, v1alpha1.ShortfallUnitMembers)
	}
	if r.Free.Value() != 3 || r.Member.Value() != 1 || r.LargestFree.Value() != 2 || r.LargestFreeNode != ns+"-1" {
		t.Errorf("device row free=%s member=%s largestFree=%s on %q, want 3, 1, 2 on %s",
			r.Free.String(), r.Member.String(), r.LargestFree.String(), r.LargestFreeNode, ns+"-1")
	}
	for _, other := range s.Resources {
		if other.Name != r.Name && (other.DeviceClass != "" || other.Unit != "") {
			t.Errorf("row %s is not a device row but has class %q unit %q", other.Name, other.DeviceClass, other.Unit)
		}
	}
	ev := waitForEvent(t, ns, "train", podgroup.ReasonGangInfeasible, schedulerName)
	if !strings.Contains(ev.Message, e.class) {
		t.Errorf("GangInfeasible event %q does not name the device class %s", ev.Message, e.class)
	}
	consistentlyNoneBound(t, 2*time.Second, ns, "train")

	// In one rack: rack a's devices hold 1 member, rack b's 2.
	watchWhole(t, ns, "rack", 3, nil)
	watchOneDomain(t, ns, "rack", rackLabel)
	createTopologyPodGroup(t, ns, "rack", 3, map[string]any{"required": rackLabel})
	for i := range 3 {
		createPod(t, e.extPod(fmt.Sprintf("rack-%d", i), "rack", "1", "gang"))
	}
	s = e.waitForDeviceShortfall(t, "rack", 3)
	t.Logf("rack shortfall: reason=%s key=%s domains=%+v", s.Reason, s.TopologyKey, s.Domains)
	if s.Reason != v1alpha1.ShortfallTopologyDomain || s.TopologyKey != rackLabel {
		t.Fatalf("rack shortfall reason %s key %q, want %s %s", s.Reason, s.TopologyKey, v1alpha1.ShortfallTopologyDomain, rackLabel)
	}
	got := map[string]int32{}
	for _, d := range s.Domains {
		for _, dev := range d.Devices {
			if dev.Name == v1.ResourceName("devices/"+e.class) {
				got[d.Value] = dev.Free
			}
		}
	}
	if got[rackA] != 1 || got[rackB] != 2 || len(got) != 2 {
		t.Errorf("devices per rack %v, want %s: 1, %s: 2", got, rackA, rackB)
	}
	ev = waitForEvent(t, ns, "rack", podgroup.ReasonGangInfeasible, schedulerName)
	t.Logf("rack GangInfeasible event: %s", ev.Message)
	if !strings.Contains(ev.Message, e.class) {
		t.Errorf("GangInfeasible event %q of the rack gang does not name the device class %s", ev.Message, e.class)
	}
	consistentlyNoneBound(t, 2*time.Second, ns, "train", "rack")
}
