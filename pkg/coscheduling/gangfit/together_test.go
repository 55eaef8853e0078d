package gangfit

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
)

// The whole-tree check: the groups of one job placed at once, each its own need.
func TestFitTogether(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	role := func(group string, n int, cpu string) []*v1.Pod {
		pods := make([]*v1.Pod, n)
		for i := range pods {
			pods[i] = member(fmt.Sprintf("%s-%d", group, i), group, cpu)
		}
		return pods
	}
	twoSmall := []fwk.NodeInfo{node("a", "4"), node("b", "4")}
	mixed := append(role("x", 1, "1"), role("x", 2, "3")...)
	for _, tc := range []struct {
		name     string
		groups   []Group
		nodes    []fwk.NodeInfo
		feasible bool
		message  string
	}{
		{name: "each role fits alone, not together", nodes: twoSmall,
			groups:  []Group{{Key: "ns/decode", Candidates: role("decode", 4, "2"), Need: 4}, {Key: "ns/prefill", Candidates: role("prefill", 2, "3"), Need: 2}},
			message: "PodGroup ns/decode fits, but not together with the groups its job ns/serve needs with it (members to place: ns/decode: 4, ns/prefill: 2): PodGroup ns/serve needs 6 more members placed at once"},
		{name: "together on a roomier cluster", nodes: append(twoSmall, node("c", "8")), feasible: true,
			groups: []Group{{Key: "ns/decode", Candidates: role("decode", 4, "2"), Need: 4}, {Key: "ns/prefill", Candidates: role("prefill", 2, "3"), Need: 2}}},
		{name: "a group that needs nothing more leaves the other's own check", nodes: twoSmall, feasible: true,
			groups: []Group{{Key: "ns/decode", Candidates: role("decode", 4, "2"), Need: 4}, {Key: "ns/prefill", Need: 0}}},
		{name: "alike spare candidates: the first of them stand for any", nodes: twoSmall,
			groups:  []Group{{Key: "ns/decode", Candidates: role("decode", 4, "2"), Need: 4}, {Key: "ns/prefill", Candidates: role("prefill", 3, "3"), Need: 2}},
			message: "not together"},
		{name: "spare candidates not alike: not judged", nodes: twoSmall, feasible: true,
			groups: []Group{{Key: "ns/decode", Candidates: role("decode", 4, "2"), Need: 4}, {Key: "ns/x", Candidates: mixed, Need: 2}}},
		{name: "too few candidates: not judged (held back before the queue)", nodes: twoSmall, feasible: true,
			groups: []Group{{Key: "ns/decode", Candidates: role("decode", 4, "2"), Need: 4}, {Key: "ns/prefill", Candidates: role("prefill", 1, "3"), Need: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := FitTogether(logger, "ns/serve", tc.groups, tc.nodes, nil, nil, false, nil)
			if res.Feasible != tc.feasible {
				t.Fatalf("feasible = %v, want %v (%s)", res.Feasible, tc.feasible, res.Message)
			}
			if !tc.feasible && (!res.Tree || res.Shortfall != nil || !strings.Contains(res.Message, tc.message)) {
				t.Errorf("result %+v: want Tree, no shortfall, and a message containing %q", res, tc.message)
			}
		})
	}
}

func TestAlikeGroups(t *testing.T) {
	replica := func(i int, workerCPU string) []*v1.Pod {
		g := fmt.Sprint("r", i)
		// LWS orders nothing: the leader need not come first.
		return []*v1.Pod{member(g+"-1", g, workerCPU), member(g+"-0", g, "1"), member(g+"-2", g, workerCPU)}
	}
	leaderLast := replica(1, "2")
	leaderLast[0], leaderLast[1] = leaderLast[1], leaderLast[0]
	for _, tc := range []struct {
		name   string
		groups [][]*v1.Pod
		want   bool
	}{
		{name: "replicas of one template, a leader and workers each", groups: [][]*v1.Pod{replica(0, "2"), leaderLast, replica(2, "2")}, want: true},
		{name: "a replica of other workers", groups: [][]*v1.Pod{replica(0, "2"), replica(1, "3")}},
		{name: "a replica of fewer pods", groups: [][]*v1.Pod{replica(0, "2"), replica(1, "2")[:2]}},
		{name: "one group", groups: [][]*v1.Pod{replica(0, "2")}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AlikeGroups(tc.groups); got != tc.want {
				t.Errorf("AlikeGroups = %v, want %v", got, tc.want)
			}
		})
	}
}

// The job's groups planned together: a role that may go anywhere is planned beside the room a role
// kept to a few nodes needs, not on it (members of one size: the more constrained first).
func TestPlanTogether(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	role := func(group string, n int, only string) []*v1.Pod {
		pods := make([]*v1.Pod, n)
		for i := range pods {
			pods[i] = member(fmt.Sprintf("%s-%d", group, i), group, "3")
			if only != "" {
				pods[i].Spec.NodeSelector = map[string]string{"pool": only}
			}
		}
		return pods
	}
	small := func(name string) fwk.NodeInfo {
		ni := node(name, "4")
		n := ni.Node().DeepCopy()
		n.Labels = map[string]string{"pool": "x"}
		ni.SetNode(n)
		return ni
	}
	anyRole, onX := role("any", 2, ""), role("onx", 2, "x")
	for _, groups := range [][]Group{
		{{Key: "ns/any", Candidates: anyRole, Need: 2}, {Key: "ns/onx", Candidates: onX, Need: 2}},
		{{Key: "ns/onx", Candidates: onX, Need: 2}, {Key: "ns/any", Candidates: anyRole, Need: 2}},
	} {
		t.Run(groups[0].Key+" first", func(t *testing.T) {
			nodes := []fwk.NodeInfo{small("x-0"), small("x-1"), node("big", "8")}
			res, p := FitTogether(logger, "ns/job", groups, nodes, nil, nil, true, nil)
			if !res.Feasible {
				t.Fatalf("the job fits: %s", res.Message)
			}
			if p == nil {
				t.Fatal("no plan")
			}
			for _, pn := range p.Nodes {
				if want := ShapeOf(onX[0]); pn.Name != "big" && pn.Shape != want {
					t.Errorf("plan %+v: the small nodes are onx's", p.Nodes)
				}
			}
		})
	}
}

// The job's domain: the tightest domain of the key that holds every group's missing members, or the
// one its placed members pin.
func TestJobDomain(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	role := func(group string, n int, cpu string) []*v1.Pod {
		pods := make([]*v1.Pod, n)
		for i := range pods {
			pods[i] = member(fmt.Sprintf("%s-%d", group, i), group, cpu)
		}
		return pods
	}
	// Block b1: two 4-CPU nodes (decode alone fits); b2: four (the job fits); b3: six (it fits too, looser).
	var nodes []fwk.NodeInfo
	for b, n := range map[string]int{"b1": 2, "b2": 4, "b3": 6} {
		for i := range n {
			nodes = append(nodes, rackedNode(fmt.Sprintf("%s-%d", b, i), "z", b, b+"r"))
		}
	}
	groups := []Group{{Key: "ns/decode", Candidates: role("decode", 4, "2"), Need: 4}, {Key: "ns/prefill", Candidates: role("prefill", 2, "3"), Need: 2}}
	block := Policy{Required: blockKey}
	p, ok := JobDomain(logger, "ns/serve", groups, block, nil, Avoid{}, nodes, nil, nil)
	if !ok || p.Value != "b2" || p.Nodes.Len() != 4 || p.Message != "placed in example.com/block=b2 with the other groups of its job ns/serve" {
		t.Errorf("chosen %+v, %v; want the tightest block that holds the job, b2", p, ok)
	}
	if p, ok := JobDomain(logger, "ns/serve", groups, block, map[string]string{blockKey: "b1"}, Avoid{}, nodes, nil, nil); !ok || p.Value != "b1" || p.Nodes.Len() != 2 {
		t.Errorf("pinned %+v, %v; want b1, where the job's members are", p, ok)
	}
	if _, ok := JobDomain(logger, "ns/serve", groups, block, nil, Avoid{}, nodes[:0:0], nil, nil); ok {
		t.Error("a domain chosen on no nodes")
	}
	// Preferred keys: the tightest block that holds the job, as required; where none does, anywhere.
	pref := Policy{Preferred: []string{blockKey}}
	if p, ok := JobDomain(logger, "ns/serve", groups, pref, nil, Avoid{}, nodes, nil, nil); !ok || p.Value != "b2" || p.Level != LevelPreferred {
		t.Errorf("preferred %+v, %v; want b2, the tightest block that holds the job", p, ok)
	}
	if p, ok := JobDomain(logger, "ns/serve", groups, pref, nil, Avoid{}, nodes[:2], nil, nil); !ok || p.Level != LevelAnywhere || p.Nodes != nil {
		t.Errorf("preferred on two nodes of b-anything %+v, %v; want anywhere: no block holds the job", p, ok)
	}
	// Refused recently in b2 (a filter the check does not model): the next block that holds the job,
	// b3; refused in b2 and b3, the least recently refused of them; never b1, which does not hold it.
	now := time.Now()
	if p, ok := JobDomain(logger, "ns/serve", groups, block, nil, Avoid{Refused: map[string]time.Time{blockKey + "=b2": now}}, nodes, nil, nil); !ok || p.Value != "b3" {
		t.Errorf("b2 refused: %+v, %v; want b3", p, ok)
	}
	both := map[string]time.Time{blockKey + "=b2": now.Add(time.Minute), blockKey + "=b3": now}
	if p, ok := JobDomain(logger, "ns/serve", groups, block, nil, Avoid{Refused: both}, nodes, nil, nil); !ok || p.Value != "b3" {
		t.Errorf("b2 and b3 refused, b3 first: %+v, %v; want b3 (refused less recently)", p, ok)
	}
	if p, ok := JobDomain(logger, "ns/serve", groups, block, map[string]string{blockKey: "b2"}, Avoid{Refused: both}, nodes, nil, nil); !ok || p.Value != "b2" {
		t.Errorf("refused but pinned to b2: %+v, %v; want b2, where the job's members are", p, ok)
	}
	// Pinned by placed members to b3 (preferred): the job stays there while it fits.
	if p, ok := JobDomain(logger, "ns/serve", groups, pref, map[string]string{blockKey: "b3"}, Avoid{}, nodes, nil, nil); !ok || p.Value != "b3" {
		t.Errorf("preferred, pinned to b3: %+v, %v; want b3", p, ok)
	}
}
