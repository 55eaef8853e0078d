package gang

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// TestAdmit: a member whose PodGroup is missing is refused without an event, one whose topology
// annotations are malformed with InvalidTopologyPolicy; an admitted one's input carries its
// PodGroup's spec and its policy (the spec's, else its annotations', else the default).
func TestAdmit(t *testing.T) {
	pg := gangtest.PodGroup("ns", "g", 3, t0)
	pg.UID, pg.Generation, pg.Spec.MinResources = "uid", 4, v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	withSpec := pg.DeepCopy()
	withSpec.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: "example.com/rack"}
	bad := gangtest.Member("m", "g", "1")
	bad.Annotations = map[string]string{gangfit.AnnotationTopologyRequired: "not a key"}
	zone := config.TopologyPolicy{Required: "topology.kubernetes.io/zone"}
	for _, tc := range []struct {
		name   string
		pg     *v1alpha1.PodGroup
		member *v1.Pod
		def    config.TopologyPolicy
		reason string
		msg    string
		policy string // the required key admitted
	}{
		{name: "its PodGroup is missing", member: gangtest.Member("m", "g", "1"), msg: "PodGroup ns/g does not exist"},
		{name: "malformed annotations", pg: pg, member: bad, reason: podgroup.ReasonInvalidTopologyPolicy,
			msg: `PodGroup ns/g member ns/m: annotation ` + gangfit.AnnotationTopologyRequired + `="not a key" is not a label key: `},
		{name: "the spec's policy wins over malformed annotations", pg: withSpec, member: bad, policy: "example.com/rack"},
		{name: "the profile's default", pg: pg, member: gangtest.Member("m", "g", "1"), def: zone, policy: zone.Required},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := PreFilterIn{Member: tc.member}
			got := in.Admit("ns/g", tc.pg, tc.def)
			if got.Reason != tc.reason || len(got.Message) < len(tc.msg) || got.Message[:len(tc.msg)] != tc.msg || (tc.msg == "") != (got.Message == "") {
				t.Fatalf("Admit = %+v, want reason %q, message %q...", got, tc.reason, tc.msg)
			}
			if tc.msg != "" {
				if in.Want != 0 || in.UID != "" {
					t.Errorf("a refused member's input was filled in: %+v", in)
				}
				return
			}
			if in.Want != 3 || in.UID != "uid" || in.Generation != 4 || !in.MinResources.Cpu().Equal(resource.MustParse("2")) || in.Policy.Required != tc.policy {
				t.Errorf("admitted input: want %d, uid %q, generation %d, minResources %v, policy %+v", in.Want, in.UID, in.Generation, in.MinResources, in.Policy)
			}
		})
	}
}
