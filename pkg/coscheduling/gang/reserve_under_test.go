package gang

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/internal/gangtest"
	resv "github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/reservation"
)

// traceLock records its holds in a trace.
type traceLock struct {
	trace *[]string
	held  bool
}

func (l *traceLock) Lock()   { l.held = true; *l.trace = append(*l.trace, "lock") }
func (l *traceLock) Unlock() { l.held = false; *l.trace = append(*l.trace, "unlock") }

// TestReserveUnder is a row per shape of a member's reservation steps, traced: each step applied
// under the lock, what steps left finished with it released and before the plan, the plan made with
// it released (the nodes read there), the gauges of an adopted or started reservation kept under it.
func TestReserveUnder(t *testing.T) {
	args := resv.Args{After: time.Minute, Timeout: 10 * time.Minute, MaxGangs: 2, Recheck: 10 * time.Second, StallAfter: 30 * time.Second}
	low := gangtest.Running("low", "", "a", "4", 10)
	roomOnA := []fwk.NodeInfo{gangtest.NodeWith("a", "4", low)}
	m0 := preemptor("m0", "4")
	nominated := m0.DeepCopy()
	nominated.Status.NominatedNodeName = "a"
	waiting := func() *Gang {
		g := New("ns", "g", "uid")
		g.Reserve.State = resv.State{Phase: resv.Waiting, WaitingSince: t0.Add(-2 * time.Minute), LastTried: t0.Add(-time.Second), Prio: 100}
		return g
	}
	reserved := &metav1.Condition{Type: "Reserved", Status: metav1.ConditionTrue, Message: "holds room on a", LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))}
	for _, tc := range []struct {
		name    string
		gang    func() *Gang
		adopt   *metav1.Condition
		members []*v1.Pod
		want    string
	}{
		{name: "it has not waited long enough: one step, no plan",
			gang: func() *Gang { return New("ns", "g", "uid") },
			want: "lock queue applied unlock finish(1)"},
		{name: "waited long enough, room frees: the plan outside the lock, then the start's step and gauges under it",
			gang: waiting,
			want: "lock queue applied unlock finish(1) nodes lock applied planned(started) unlock finish(1)"},
		{name: "a previous leader's reservation adopted (its gauges), then rechecked",
			gang: func() *Gang { return New("ns", "g", "uid") }, adopt: reserved, members: []*v1.Pod{nominated},
			want: "lock queue applied applied adopted unlock finish(2) nodes lock applied planned unlock finish(1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var trace []string
			mu := &traceLock{trace: &trace}
			members := tc.members
			if members == nil {
				members = []*v1.Pod{m0}
			}
			underLock := func(what string) {
				if !mu.held {
					t.Errorf("%s without the lock", what)
				}
				trace = append(trace, what)
			}
			in := ReserveIn{Args: args, Now: t0, Pod: m0, PodGroup: gangtest.PodGroup("ns", "g", 1, t0), Adopt: tc.adopt, Logger: klog.Background(),
				Members: func() []*v1.Pod { return members },
				Nodes: func() ([]fwk.NodeInfo, error) {
					if mu.held {
						t.Error("the nodes read under the lock")
					}
					trace = append(trace, "nodes")
					return roomOnA, nil
				},
				Claims: func(int32) []*v1.Pod { return nil },
			}
			g := tc.gang()
			got, out := ReserveUnder(mu, func() *Gang { return g }, in, ReserveHooks{
				Queue: func(*Gang) func(int32) (int, bool) {
					underLock("queue")
					return func(int32) (int, bool) { return 0, false }
				},
				Applied: func(*Gang, resv.Effects) ReservationDone { underLock("applied"); return ReservationDone{} },
				Adopted: func() { underLock("adopted") },
				Planned: func(started bool) {
					if started {
						underLock("planned(started)")
					} else {
						underLock("planned")
					}
				},
				Finish: func(done []ReservationDone) {
					if mu.held {
						t.Error("finished under the lock")
					}
					trace = append(trace, fmt.Sprintf("finish(%d)", len(done)))
				},
			})
			if got != g {
				t.Error("another gang returned")
			}
			if diff := cmp.Diff(tc.want, strings.Join(trace, " ")); diff != "" {
				t.Errorf("trace (-want,+got):\n%s", diff)
			}
			if tc.adopt != nil && !out.Adopted {
				t.Error("not adopted")
			}
		})
	}
}
