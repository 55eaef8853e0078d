package gang

import (
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
)

// heldLock is a mutex that says whether it is held, so a reader can tell it is read under it.
type heldLock struct {
	sync.Mutex
	held  bool
	holds int
}

func (l *heldLock) Lock()   { l.Mutex.Lock(); l.held = true; l.holds++ }
func (l *heldLock) Unlock() { l.held = false; l.Mutex.Unlock() }

// TestPreemptUnder is a row per way a member's gang preemption is run: an earlier member's answer
// reused (no node read, no split), a failed read of the nodes, a fresh answer remembered or not, and
// the gang's split read under the lock, its count of members at the lock's first hold.
func TestPreemptUnder(t *testing.T) {
	low := func(name, node, cpu string) *v1.Pod { return gangtest.Running(name, "", node, cpu, 10) }
	pod := preemptor("m0", "4")
	pg := gangtest.PodGroup("ns", "g", 1, t0)
	k := PreemptKey{Priority: 100, FeasibilityKey: FeasibilityKey{Epoch: 7, UID: pg.UID, Want: 1, Existing: 1, At: t0}}
	notHelpful := PreemptOut{Result: PreemptNotHelpful, Message: "earlier"}
	boom := errors.New("boom")
	cases := []struct {
		name string
		// last is the gang's remembered answer, made under lastKey; counted members are reserved.
		last     *PreemptOut
		lastKey  PreemptKey
		counted  int
		nodes    []fwk.NodeInfo
		nodesErr error
		want     string
		wantMsg  string
		cached   bool
		// wantReads: the nodes read, the split read; wantKept: the answer remembered afterwards.
		wantReads [2]int
		wantKept  bool
	}{
		{name: "an earlier member's answer of this attempt: reused, nothing read",
			last: &notHelpful, lastKey: k, want: PreemptNotHelpful, wantMsg: "earlier", cached: true, wantKept: true},
		{name: "a member reserved since the answer: the gang's count is read under the lock, the answer is not reused (and the split counts it: nothing left to place)",
			last: &notHelpful, lastKey: k, counted: 1, nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("x", "a", "4"))},
			want: PreemptNotEligible, wantReads: [2]int{1, 1}},
		{name: "the nodes cannot be listed: an error, and the earlier answer forgotten",
			last: &notHelpful, lastKey: PreemptKey{Priority: 5}, nodesErr: boom, want: PreemptError, wantReads: [2]int{1, 0}},
		{name: "no lower pod anywhere: not helpful before the split, and remembered",
			nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", gangtest.Running("hi", "", "a", "4", 100))},
			want:  PreemptNotHelpful, wantMsg: "preemption: PodGroup ns/g does not fit, and no pod of lower priority runs on any node",
			wantReads: [2]int{1, 0}, wantKept: true},
		{name: "victims: decided on the split, not remembered",
			nodes: []fwk.NodeInfo{gangtest.NodeWith("a", "4", low("x", "a", "4"))}, want: PreemptVictims, wantReads: [2]int{1, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := New("ns", "g", pg.UID)
			for i := range tc.counted {
				g.CountReserved(types.UID(rune('a'+i)), "n")
			}
			if tc.last != nil {
				g.LastPreemption = &PreemptMemo{Key: tc.lastKey, Out: *tc.last}
			}
			var mu heldLock
			var reads [2]int
			gangFor := func() *Gang {
				if !mu.held {
					t.Error("the gang read without the lock")
				}
				return g
			}
			in := PreemptIn{Pod: pod, PodGroup: pg, Members: []*v1.Pod{pod}, Fit: &gangfit.Shared{}, Logger: klog.Background(),
				Terminating: func([]string, int32) int { return 0 },
				Claims:      func() []*v1.Pod { return nil },
				PDBs:        func() ([]*policy.PodDisruptionBudget, error) { return nil, nil },
				Leaving:     func(*v1.Pod) bool { return false }}
			nodes := func() ([]fwk.NodeInfo, error) {
				reads[0]++
				if mu.held {
					t.Error("the nodes read under the lock")
				}
				return tc.nodes, tc.nodesErr
			}
			// After the nodes are read, the lock is held once to remember the answer, and once more
			// before that only if the split was read.
			before := 0
			out, cached := PreemptUnder(&mu, gangFor, k, time.Minute, in, func() ([]fwk.NodeInfo, error) { before = mu.holds; return nodes() })
			if tc.wantReads[0] > 0 && mu.holds-before > 1 {
				reads[1] = 1
			}
			if out.Result != tc.want || (tc.wantMsg != "" && out.Message != tc.wantMsg) || cached != tc.cached {
				t.Errorf("PreemptUnder = %s %q cached=%v, want %s %q cached=%v", out.Result, out.Message, cached, tc.want, tc.wantMsg, tc.cached)
			}
			if tc.nodesErr != nil && !errors.Is(out.Err, tc.nodesErr) {
				t.Errorf("error %v, want %v", out.Err, tc.nodesErr)
			}
			if reads != tc.wantReads {
				t.Errorf("reads (nodes, split) %v, want %v", reads, tc.wantReads)
			}
			if kept := g.LastPreemption != nil; kept != tc.wantKept {
				t.Errorf("answer remembered: %v, want %v", kept, tc.wantKept)
			}
			if mu.held {
				t.Error("the lock is held on return")
			}
		})
	}
}
