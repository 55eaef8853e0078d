package gangfit

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/config"
	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

func TestChoosePlacement(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cases := []struct {
		name      string
		gang      []*v1.Pod
		policy    Policy
		nodes     []fwk.NodeInfo
		pinned    map[string]string
		busy      map[string]bool
		wantOK    bool
		wantKey   string
		wantValue string
		wantLevel string
		wantMsg   string
	}{
		{name: "required rack: the tightest rack that fits", gang: gangOf(2, "3"), policy: Policy{Required: rackKey},
			wantOK: true, wantKey: rackKey, wantValue: "r1", wantLevel: LevelRequired},
		{name: "best fit keeps the big rack for a bigger gang", gang: gangOf(3, "3"), policy: Policy{Required: rackKey},
			wantOK: true, wantKey: rackKey, wantValue: "r3", wantLevel: LevelRequired},
		{name: "only the big rack fits", gang: gangOf(4, "3"), policy: Policy{Required: rackKey},
			wantOK: true, wantKey: rackKey, wantValue: "r2", wantLevel: LevelRequired},
		{name: "required and no rack fits, though the cluster has room", gang: gangOf(5, "3"), policy: Policy{Required: rackKey},
			wantMsg: "no example.com/rack domain has room for 5 members; the best fits 4"},
		{name: "preferred falls back to the block", gang: gangOf(5, "3"), policy: Policy{Preferred: []string{rackKey, blockKey}},
			wantOK: true, wantKey: blockKey, wantValue: "b1", wantLevel: LevelPreferred, wantMsg: "preferred level 2 of 2"},
		{name: "preferred rack within a required zone", gang: gangOf(7, "3"), policy: Policy{Required: zoneKey, Preferred: []string{rackKey, blockKey}},
			wantOK: true, wantKey: zoneKey, wantValue: "z1", wantLevel: LevelRequired, wantMsg: "no example.com/block domain has room for 7 members; the best fits 6"},
		{name: "preferred and nothing fits: anywhere", gang: gangOf(10, "3"), policy: Policy{Preferred: []string{rackKey}},
			wantOK: true, wantLevel: LevelAnywhere, wantMsg: "the best fits 4"},
		{name: "nodes without the label are in no domain", gang: gangOf(1, "3"), policy: Policy{Required: "example.com/pod"},
			wantMsg: "no node has the label example.com/pod"},
		{name: "bound members pin the domain, though another rack fits tighter", gang: gangOf(1, "3"), policy: Policy{Required: rackKey},
			pinned: map[string]string{rackKey: "r2"}, wantOK: true, wantKey: rackKey, wantValue: "r2", wantLevel: LevelRequired},
		{name: "bound members in several racks cannot satisfy a required rack", gang: gangOf(1, "3"), policy: Policy{Required: rackKey},
			pinned: map[string]string{rackKey: ""}, wantMsg: "not in one example.com/rack domain"},
		{name: "ties go to the first domain by name", gang: gangOf(1, "3"), policy: Policy{Required: rackKey},
			nodes:  []fwk.NodeInfo{rackedNode("b", "", "", "rb"), rackedNode("a", "", "", "ra")},
			wantOK: true, wantKey: rackKey, wantValue: "ra", wantLevel: LevelRequired},
		{name: "a rack another gang's attempt is filling is passed over when another fits", gang: gangOf(2, "3"), policy: Policy{Required: rackKey},
			busy: map[string]bool{rackKey + "=r1": true}, wantOK: true, wantKey: rackKey, wantValue: "r3", wantLevel: LevelRequired},
		{name: "a busy rack is still chosen when it is the only one that fits", gang: gangOf(4, "3"), policy: Policy{Required: rackKey},
			busy: map[string]bool{rackKey + "=r2": true}, wantOK: true, wantKey: rackKey, wantValue: "r2", wantLevel: LevelRequired},
		{name: "reserved pods on a rack's nodes count", gang: gangOf(2, "3"), policy: Policy{Required: rackKey},
			nodes: []fwk.NodeInfo{rackedNode("a0", "", "", "ra", member("x", "other", "2")), rackedNode("a1", "", "", "ra"),
				rackedNode("b0", "", "", "rb"), rackedNode("b1", "", "", "rb"), rackedNode("b2", "", "", "rb")},
			wantOK: true, wantKey: rackKey, wantValue: "rb", wantLevel: LevelRequired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := choosePlacementOn(logger, tc.nodes, tc.gang, tc.policy, tc.pinned, tc.busy)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v (%q), want %v", ok, got.Message, tc.wantOK)
			}
			if ok && (got.Key != tc.wantKey || got.Value != tc.wantValue || got.Level != tc.wantLevel) {
				t.Errorf("placement %s=%s (%s), want %s=%s (%s)", got.Key, got.Value, got.Level, tc.wantKey, tc.wantValue, tc.wantLevel)
			}
			if !strings.Contains(got.Message, tc.wantMsg) {
				t.Errorf("message %q does not contain %q", got.Message, tc.wantMsg)
			}
			if ok && got.Key != "" {
				nodes := tc.nodes
				if nodes == nil {
					nodes = rackedCluster()
				}
				for _, ni := range nodes {
					if v, has := ni.Node().Labels[got.Key]; has && v == got.Value != got.Nodes.Has(ni.Node().Name) {
						t.Errorf("node %s in the domain: %v, want %v", ni.Node().Name, got.Nodes.Has(ni.Node().Name), v == got.Value)
					}
				}
			}
		})
	}
}

func TestTopologyPolicyFor(t *testing.T) {
	withSpec := makePG("ns", "g", 2, time.Time{})
	withSpec.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: rackKey}
	plain := makePG("ns", "g", 2, time.Time{})
	annotated := member("m", "g", "1")
	annotated.Annotations = map[string]string{AnnotationTopologyRequired: zoneKey, AnnotationTopologyPreferred: rackKey + ", " + blockKey}
	bad := member("m", "g", "1")
	bad.Annotations = map[string]string{AnnotationTopologyPreferred: "example.com/rack,not a key"}
	def := config.TopologyPolicy{Preferred: []string{blockKey}}

	cases := []struct {
		name    string
		pg      *v1alpha1.PodGroup
		pod     *v1.Pod
		want    Policy
		wantErr string
	}{
		{name: "the PodGroup's spec wins", pg: withSpec, pod: annotated, want: Policy{Required: rackKey, Source: "spec"}},
		{name: "the members' annotations", pg: plain, pod: annotated, want: Policy{Required: zoneKey, Preferred: []string{rackKey, blockKey}, Source: "annotation"}},
		{name: "the profile's default", pg: plain, pod: member("m", "g", "1"), want: Policy{Preferred: []string{blockKey}, Source: "default"}},
		{name: "a malformed annotation is an error", pg: plain, pod: bad, wantErr: `"not a key" is not a label key`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PolicyFor(tc.pg, tc.pod, def)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Required != tc.want.Required || strings.Join(got.Preferred, ",") != strings.Join(tc.want.Preferred, ",") || got.Source != tc.want.Source {
				t.Errorf("policy %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestPolicyFixed: only an update that makes a malformed policy valid requeues the member; one whose
// PodGroup's spec overrides its annotations never needed fixing.
func TestPolicyFixed(t *testing.T) {
	withSpec := makePG("ns", "g", 2, time.Time{})
	withSpec.Spec.TopologyPolicy = &v1alpha1.TopologyPolicy{Required: rackKey}
	plain := makePG("ns", "g", 2, time.Time{})
	good := member("m", "g", "1")
	good.Annotations = map[string]string{AnnotationTopologyRequired: zoneKey}
	bad := member("m", "g", "1")
	bad.Annotations = map[string]string{AnnotationTopologyPreferred: "example.com/rack,not a key"}
	for _, tc := range []struct {
		name     string
		pg       *v1alpha1.PodGroup
		old, pod *v1.Pod
		want     bool
	}{
		{"malformed, then valid", plain, bad, good, true},
		{"malformed, then valid by losing the annotation", plain, bad, member("m", "g", "1"), true},
		{"malformed, still malformed", plain, bad, bad, false},
		{"valid, then valid", plain, good, good, false},
		{"valid, then malformed", plain, good, bad, false},
		{"the spec's policy: never malformed", withSpec, bad, good, false},
	} {
		if got := PolicyFixed(tc.pg, tc.old, tc.pod, config.TopologyPolicy{}); got != tc.want {
			t.Errorf("%s: PolicyFixed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPolicyFixedHint: a member's own update requeues it only when it makes its malformed policy
// valid; a pod of no group, a member whose PodGroup is missing and an add (no old pod) are skipped,
// and objects that are no pods are an error that requeues.
func TestPolicyFixedHint(t *testing.T) {
	plain := makePG("ns", "g", 2, time.Time{})
	good := member("m", "g", "1")
	good.Annotations = map[string]string{AnnotationTopologyRequired: zoneKey}
	bad := member("m", "g", "1")
	bad.Annotations = map[string]string{AnnotationTopologyRequired: "not a key"}
	noGroup := member("m", "g", "1")
	noGroup.Labels = nil
	for _, tc := range []struct {
		name     string
		pgs      map[string]*v1alpha1.PodGroup
		old, new interface{}
		want     fwk.QueueingHint
		err      bool
	}{
		{name: "fixed", pgs: map[string]*v1alpha1.PodGroup{"g": plain}, old: bad, new: good, want: fwk.Queue},
		{name: "still malformed", pgs: map[string]*v1alpha1.PodGroup{"g": plain}, old: bad, new: bad, want: fwk.QueueSkip},
		{name: "never malformed", pgs: map[string]*v1alpha1.PodGroup{"g": plain}, old: good, new: good, want: fwk.QueueSkip},
		{name: "its PodGroup missing", old: bad, new: good, want: fwk.QueueSkip},
		{name: "no old pod", pgs: map[string]*v1alpha1.PodGroup{"g": plain}, new: good, want: fwk.QueueSkip},
		{name: "a pod of no group", pgs: map[string]*v1alpha1.PodGroup{"g": plain}, old: noGroup, new: noGroup, want: fwk.QueueSkip},
		{name: "not a pod", old: bad, new: "not a pod", want: fwk.Queue, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hint := PolicyFixedHint(func(ns, name string) *v1alpha1.PodGroup { return tc.pgs[name] }, config.TopologyPolicy{})
			got, err := hint(klog.Background(), good, tc.old, tc.new)
			if got != tc.want || (err != nil) != tc.err {
				t.Errorf("hint = %v, %v; want %v (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}
