package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// domainMemoryPort is the host port every pod of TestDomainMemory asks for.
const domainMemoryPort = 7070

// withHostPort gives a pod's first container the host port.
func withHostPort(p *v1.Pod, port int32) *v1.Pod {
	p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "p", ContainerPort: port, HostPort: port, Protocol: v1.ProtocolTCP}}
	return p
}

// TestDomainMemory: a required topology domain that the real filters refused is not chosen again while
// another domain fits. Rack dm-a (four 2-CPU nodes) is the tighter CPU fit for a gang of four 1-CPU
// members, rack dm-b (four 4-CPU nodes) the looser; every dm-a node already runs a pod holding the host
// port the members ask for, which the whole-gang check does not model. The first attempt is placed in
// dm-a and fails there (NodePorts refuses every node); the next one, after the shipped 10 s back-off,
// must avoid dm-a and place the gang whole in dm-b. Before the gang remembered refused domains, every
// attempt chose dm-a again and nothing bound. Through the shipped profile (placement plan on), with the
// invariant watchers on throughout: never a partial gang, never two racks.
func TestDomainMemory(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))
	ns := testNamespace(t)
	for i := range 4 {
		a := createNode(t, fmt.Sprintf("dm-a-%d", i), "2", "8Gi", map[string]string{rackLabel: "dm-a", blockLabel: "dm"})
		createNode(t, fmt.Sprintf("dm-b-%d", i), "4", "8Gi", map[string]string{rackLabel: "dm-b", blockLabel: "dm"})
		// Bound by hand (no scheduler): the port is taken on the node as soon as the pod exists.
		blocker := withHostPort(gangPod(ns, fmt.Sprintf("port-holder-%d", i), "", "100m"), domainMemoryPort)
		delete(blocker.Labels, v1alpha1.PodGroupLabel)
		blocker.Spec.NodeName = a.Name
		createPod(t, blocker)
	}
	watchWhole(t, ns, "job", 4, nil)
	watchOneDomain(t, ns, "job", rackLabel)
	createTopologyPodGroup(t, ns, "job", 4, map[string]any{"required": rackLabel})
	start := time.Now()
	for i := range 4 {
		createPod(t, withHostPort(gangPod(ns, fmt.Sprintf("job-%d", i), "job", "1"), domainMemoryPort))
	}
	waitForBoundMembers(t, ns, "job", 4)
	t.Logf("the gang bound whole after %v", time.Since(start).Round(100*time.Millisecond))
	if racks := racksOf(t, ns, "job"); len(racks) != 1 || racks["dm-b"] != 4 {
		t.Errorf("members landed in racks %v, want all 4 in dm-b", racks)
	}
	// The failed attempt says where it was placed, why that rack refused it, and that it is avoided.
	ev := waitForEvent(t, ns, "job", podgroup.ReasonGangRejected, schedulerName)
	t.Logf("GangRejected: %s", ev.Message)
	for _, want := range []string{
		"cannot be placed in example.com/rack=dm-a (4 node(s) didn't have free ports for the requested pod ports",
		"example.com/rack=dm-a is avoided until ",
	} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("GangRejected event %q does not say %q", ev.Message, want)
		}
	}
	// The domain chosen next says it avoided the refused rack.
	c := waitForPodGroupConditionOf(t, ns, "job", "Topology", "RequiredDomain")
	t.Logf("Topology: %s", c.Message)
	if !strings.Contains(c.Message, "placed in example.com/rack=dm-b") || !strings.Contains(c.Message, "avoiding example.com/rack=dm-a, refused by the filters recently") {
		t.Errorf("Topology condition %q does not say dm-b was chosen avoiding dm-a", c.Message)
	}
}
