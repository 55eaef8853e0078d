package gang

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// TestDoneFor: a check's result is used only for the job it answers (the gang changed while it ran:
// the step asks again).
func TestDoneFor(t *testing.T) {
	a, b, c := gangtest.Member("a", "g", "1"), gangtest.Member("b", "g", "1"), gangtest.Member("c", "g", "1")
	k := FeasibilityKey{Epoch: 1, UID: "u", Want: 2, Existing: 2}
	ways := [][]gangfit.Group{{{Key: "ns/r1", Need: 2}}, {{Key: "ns/r2", Need: 3}}}
	job := &Job{Key: k, Gang: "ns/g", Candidates: []*v1.Pod{a, b}, Need: 2, Together: ways[0], Alternatives: ways[1:]}
	done := &Done{job: job}
	with := func(together []gangfit.Group, alternatives ...[]gangfit.Group) *Job {
		return &Job{Key: k, Gang: "ns/g", Candidates: []*v1.Pod{a, b}, Need: 2, Together: together, Alternatives: alternatives}
	}
	for _, tc := range []struct {
		name string
		j    *Job
		want bool
	}{
		{name: "the same job", j: job, want: true},
		{name: "the candidates in another order", j: &Job{Key: k, Gang: "ns/g", Candidates: []*v1.Pod{b, a}, Need: 2, Together: ways[0], Alternatives: ways[1:]}, want: true},
		{name: "the same ways", j: with(ways[0], ways[1]), want: true},
		{name: "another group placed with it", j: with(ways[1], ways[1])},
		{name: "another way (an alternative may have answered)", j: with(ways[0], []gangfit.Group{{Key: "ns/r2", Need: 2}})},
		{name: "a way fewer", j: with(ways[0])},
		{name: "a way's group gained a candidate (its pods were not all created)", j: with(ways[0], []gangfit.Group{{Key: "ns/r2", Need: 3, Candidates: []*v1.Pod{c}}})},
		{name: "a group placed with it has another candidate", j: with([]gangfit.Group{{Key: "ns/r1", Need: 2, Candidates: []*v1.Pod{c}}}, ways[1])},
		{name: "an event moved the epoch meanwhile: still its answer (recorded under the old epoch)", j: &Job{Key: FeasibilityKey{Epoch: 2, UID: "u", Want: 2, Existing: 2}, Gang: "ns/g", Candidates: []*v1.Pod{a, b}, Need: 2, Together: ways[0], Alternatives: ways[1:]}, want: true},
		{name: "a member came", j: &Job{Key: FeasibilityKey{Epoch: 1, UID: "u", Want: 2, Existing: 3}, Gang: "ns/g", Candidates: []*v1.Pod{a, b, c}, Need: 2}},
		{name: "another candidate", j: &Job{Key: k, Gang: "ns/g", Candidates: []*v1.Pod{a, c}, Need: 2}},
		{name: "the nominations against it moved", j: &Job{Key: FeasibilityKey{Epoch: 1, Claims: 4, UID: "u", Want: 2, Existing: 2}, Gang: "ns/g", Candidates: []*v1.Pod{a, b}, Need: 2}},
		{name: "an extra member's placement", j: &Job{Extra: true, Key: k, Gang: "ns/g", Candidates: []*v1.Pod{a, b}, Need: 2}},
	} {
		if got := done.For(tc.j); got != tc.want {
			t.Errorf("%s: For = %v, want %v", tc.name, got, tc.want)
		}
	}
	var none *Done
	if none.For(job) {
		t.Error("no result answers a job")
	}
}

// changingLock changes the gang each time the step releases it, as an event handler would between
// the step and its check.
type changingLock struct {
	sync.Mutex
	unlocks int
	change  func(int)
}

func (l *changingLock) Unlock() {
	l.unlocks++
	l.change(l.unlocks)
	l.Mutex.Unlock()
}

// TestDecideUnderAsksAgain: a check whose gang changed while it ran (a member bound meanwhile: the
// candidates and the count differ) is not recorded; the step asks again, at most maxJobs times in all,
// and then refuses the member for now.
func TestDecideUnderAsksAgain(t *testing.T) {
	nodes := []fwk.NodeInfo{gangtest.Node("n1", "8")}
	for _, tc := range []struct {
		name        string
		changes     int // how many of the step's releases see a member bound
		wantChecked bool
		wantReject  string
	}{
		{name: "nothing changes: one check, recorded", wantChecked: true},
		{name: "a member binds during the first check: checked again, recorded", changes: 1, wantChecked: true},
		{name: "members keep binding: refused for now", changes: maxJobs, wantReject: "changed 3 times while its check ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members := gangtest.GangOf(5, "1")
			g := New("ns", "g", "u")
			lock := &changingLock{change: func(n int) {
				if n <= tc.changes {
					g.CountBound(members[len(members)-n].UID)
				}
			}}
			in := PreFilterIn{Now: time.Unix(0, 0), Logger: klog.Background(), Member: members[0], Want: 5, UID: "u", Nodes: nodes,
				Members: func() []*v1.Pod { return members }, Claimed: func(int32) []*v1.Pod { return nil }, Gangs: map[string]*Gang{g.Key(): g}, Fit: &gangfit.Shared{}}
			out := DecideUnder(lock, func() *Gang { return g }, in)
			if out.Checked != tc.wantChecked {
				t.Errorf("checked %v, want %v (%+v)", out.Checked, tc.wantChecked, out)
			}
			if tc.wantReject != "" && (!out.Reject || !strings.Contains(out.Message, tc.wantReject)) {
				t.Errorf("out %+v, want refused: %q", out, tc.wantReject)
			}
			if tc.wantChecked && (g.Feasibility == nil || g.CacheKey.Counted != tc.changes) {
				t.Errorf("the check recorded: %v, counted %d; want the last one's, counting %d bound", g.Feasibility != nil, g.CacheKey.Counted, tc.changes)
			}
		})
	}
}

// TestJobRun: the check a step asks for, run on its own: a gang placed in the tightest rack its
// members fit (and planned when plannable), a gang no rack holds (the message names the policy), and
// an extra member placed within the rack its bound siblings pin. RackedCluster: racks r1 (2 nodes),
// r2 (4), r3 (3), 4 CPUs each.
func TestJobRun(t *testing.T) {
	nodes := gangtest.RackedCluster()
	four := func(n int) []*v1.Pod {
		out := make([]*v1.Pod, n)
		for i := range out {
			out[i] = gangtest.Member(fmt.Sprintf("m%d", i), "g", "4")
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		job         Job
		wantFit     bool
		wantRack    string
		wantPlanned bool
		wantMsg     string
	}{
		{name: "two members: the tightest rack, planned", job: Job{Gang: "ns/g", Candidates: four(2), Need: 2, Policy: rackPolicy, Plannable: true},
			wantFit: true, wantRack: "r1", wantPlanned: true},
		{name: "three members: r3, not planned when the member may not be", job: Job{Gang: "ns/g", Candidates: four(3), Need: 3, Policy: rackPolicy},
			wantFit: true, wantRack: "r3"},
		{name: "five members: no rack holds them", job: Job{Gang: "ns/g", Candidates: four(5), Need: 5, Policy: rackPolicy},
			wantMsg: "PodGroup ns/g (topology policy from spec): "},
		{name: "an extra member goes where its siblings are", job: Job{Extra: true, Gang: "ns/g", Candidates: four(1), Need: 1, Policy: rackPolicy,
			Pinned: map[string]string{gangtest.RackKey: "r2"}},
			wantFit: true, wantRack: "r2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := tc.job
			j.Nodes, j.Logger = nodes, klog.Background()
			d := j.Run(&gangfit.Shared{})
			if !d.For(&j) {
				t.Error("the result does not answer its own job")
			}
			if !j.Extra && d.Result.Feasible != tc.wantFit {
				t.Fatalf("feasible %v, want %v: %s", d.Result.Feasible, tc.wantFit, d.Result.Message)
			}
			if tc.wantMsg != "" && !strings.HasPrefix(d.Result.Message, tc.wantMsg) {
				t.Errorf("message %q, want it to start with %q", d.Result.Message, tc.wantMsg)
			}
			if tc.wantRack != "" && (d.Placement == nil || d.Placement.Value != tc.wantRack) {
				t.Errorf("placement %+v, want rack %s", d.Placement, tc.wantRack)
			}
			if (d.Plan != nil) != tc.wantPlanned {
				t.Errorf("planned %v, want %v", d.Plan != nil, tc.wantPlanned)
			}
		})
	}
}
