package claims

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// TestHandler feeds the handler one informer event a row, in order, and checks whether the whole-gang
// checks were made stale, which claims versions moved, and which cached requests were forgotten. (A
// nomination made or dropped made every check stale until the checks were keyed by the claims that
// hold room against their gang: it now moves VersionAgainst of its priority and below, wantMoved,
// and no more.)
func TestHandler(t *testing.T) {
	nominated := pod("p", "", "n1", 10)
	unnominated := pod("p", "", "", 10)
	running := pod("r", "", "", 10)
	running.Spec.NodeName = "n1"
	running.Status.Phase = v1.PodRunning
	done := running.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	pending := pod("q", "", "", 10)
	type op struct {
		kind     string // add, update, delete, tomb
		old, obj interface{}
	}
	rows := []struct {
		name        string
		op          op
		wantStale   bool
		wantForgot  types.UID
		wantDropped bool
		wantMoved   bool
	}{
		{name: "a pod without a nomination added: nothing moves", op: op{kind: "add", obj: pending}},
		{name: "a nominated pod added: its claim moves room", op: op{kind: "add", obj: nominated}, wantMoved: true},
		{name: "the same nomination again: nothing moves", op: op{kind: "update", old: nominated, obj: nominated}},
		{name: "the nomination dropped: the pods kept off its devices are told", op: op{kind: "update", old: nominated, obj: unnominated}, wantDropped: true, wantMoved: true},
		{name: "a running pod updated: nothing moves", op: op{kind: "update", old: running, obj: running}},
		{name: "a bound pod finished: its room frees", op: op{kind: "update", old: running, obj: done}, wantStale: true},
		{name: "a finished pod updated again: nothing moves", op: op{kind: "update", old: done, obj: done}},
		{name: "a pending pod deleted: its request is forgotten, no room frees", op: op{kind: "delete", obj: pending}, wantForgot: "q"},
		{name: "a bound pod deleted (a tombstone): its room frees", op: op{kind: "tomb", obj: running}, wantStale: true, wantForgot: "r"},
		{name: "not a pod: nothing", op: op{kind: "update", old: "x", obj: "y"}},
		{name: "nominated again", op: op{kind: "update", old: unnominated, obj: nominated}, wantMoved: true},
		{name: "the nominated pod deleted: its nomination is dropped", op: op{kind: "delete", obj: nominated}, wantForgot: "p", wantDropped: true, wantMoved: true},
	}
	var c Claims
	dropped := false
	c.Dropped = func() { dropped = true }
	for _, r := range rows {
		stale, forgot := false, types.UID("")
		dropped = false
		at, above := c.VersionAgainst(10), c.VersionAgainst(11)
		h := Handler(&c, func(uid types.UID) { forgot = uid }, func() { stale = true })
		switch r.op.kind {
		case "add":
			h.OnAdd(r.op.obj, false)
		case "update":
			h.OnUpdate(r.op.old, r.op.obj)
		case "delete":
			h.OnDelete(r.op.obj)
		case "tomb":
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/r", Obj: r.op.obj})
		}
		if stale != r.wantStale || forgot != r.wantForgot || dropped != r.wantDropped {
			t.Errorf("%s: stale %v, forgot %q, dropped %v; want %v, %q, %v", r.name, stale, forgot, dropped, r.wantStale, r.wantForgot, r.wantDropped)
		}
		if moved := c.VersionAgainst(10) != at; moved != r.wantMoved {
			t.Errorf("%s: the claims against priority 10 moved %v, want %v", r.name, moved, r.wantMoved)
		}
		if c.VersionAgainst(11) != above {
			t.Errorf("%s: a priority-10 claim moved the claims against priority 11", r.name)
		}
	}
}
