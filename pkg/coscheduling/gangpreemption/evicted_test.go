package gangpreemption

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

func TestEvictedUIDs(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var e Evicted
	e.Remember("old", t0)
	e.Remember("new", t0.Add(30*time.Second))
	for _, tc := range []struct {
		name string
		now  time.Time
		want sets.Set[types.UID]
	}{
		{name: "both within a minute", now: t0.Add(EvictedMemory), want: sets.New[types.UID]("old", "new")},
		{name: "the one evicted over a minute ago is not counted", now: t0.Add(EvictedMemory + time.Second), want: sets.New[types.UID]("new")},
		{name: "none past a minute", now: t0.Add(2 * EvictedMemory), want: sets.New[types.UID]()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := e.UIDs(tc.now); !got.Equal(tc.want) {
				t.Errorf("UIDs = %v, want %v", sets.List(got), sets.List(tc.want))
			}
		})
	}
}
