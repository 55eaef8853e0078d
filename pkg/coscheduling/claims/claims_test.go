package claims

import (
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
)

// pod is a pending pod of group ("" for none) at prio, nominated to node ("" for none).
func pod(name, group, node string, prio int32) *v1.Pod {
	b := st.MakePod().Namespace("ns").Name(name).UID(name).Priority(prio)
	if group != "" {
		b = b.Label(v1alpha1.PodGroupLabel, group)
	}
	p := b.Obj()
	p.Status.NominatedNodeName = node
	return p
}

func names(pods []*v1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// TestClaimsLedger walks the ledger through what the informer and the plugin tell it, one step a row,
// each row checking what is claimed against a gang of priority 100 (group ns/g) afterwards.
func TestClaimsLedger(t *testing.T) {
	bound := pod("a", "", "n1", 200)
	bound.Spec.NodeName = "n1"
	type step struct {
		name        string
		do          func(c *Claims) bool
		wantChanged bool
		wantAgainst []string
		wantHas     map[string]bool
		wantAssumed int64
	}
	steps := []step{
		{name: "an empty ledger claims nothing", do: func(c *Claims) bool { return c.Set(pod("x", "", "", 0)) }, wantAgainst: []string{}},
		{name: "a nomination of higher priority claims room", do: func(c *Claims) bool { return c.Set(pod("a", "", "n1", 200)) },
			wantChanged: true, wantAgainst: []string{"a"}, wantHas: map[string]bool{"a": true}},
		{name: "the same nomination again changes nothing", do: func(c *Claims) bool { return c.Set(pod("a", "", "n1", 200)) },
			wantAgainst: []string{"a"}},
		{name: "a nomination to another node is a change", do: func(c *Claims) bool { return c.Set(pod("a", "", "n2", 200)) },
			wantChanged: true, wantAgainst: []string{"a"}},
		{name: "a lower-priority nomination is recorded but not against the gang", do: func(c *Claims) bool { return c.Set(pod("low", "", "n1", 10)) },
			wantChanged: true, wantAgainst: []string{"a"}, wantHas: map[string]bool{"low": true}},
		{name: "the gang's own member is not against it", do: func(c *Claims) bool { return c.Set(pod("own", "g", "n1", 100)) },
			wantChanged: true, wantAgainst: []string{"a"}},
		{name: "another gang's member of equal priority is", do: func(c *Claims) bool { return c.Set(pod("other", "h", "n1", 100)) },
			wantChanged: true, wantAgainst: []string{"a", "other"}},
		{name: "a bound pod claims nothing more", do: func(c *Claims) bool { return c.Set(bound) },
			wantChanged: true, wantAgainst: []string{"other"}, wantHas: map[string]bool{"a": false}},
		{name: "a reserved member is assumed and its claim dropped", do: func(c *Claims) bool { return c.Assume(pod("other", "h", "n1", 100)) },
			wantChanged: true, wantAgainst: []string{}, wantAssumed: 1},
		{name: "an assumed member nominated while it binds claims nothing", do: func(c *Claims) bool { return c.Set(pod("other", "h", "n1", 100)) },
			wantAgainst: []string{}, wantAssumed: 1},
		{name: "unassumed, its nomination claims again", do: func(c *Claims) bool {
			c.Unassume("other")
			return c.Set(pod("other", "h", "n1", 100))
		}, wantChanged: true, wantAgainst: []string{"other"}},
		{name: "forget drops a claim", do: func(c *Claims) bool { return c.Forget(pod("other", "h", "", 100)) },
			wantChanged: true, wantAgainst: []string{}, wantHas: map[string]bool{"other": false}},
		{name: "forget of no claim is no change", do: func(c *Claims) bool { return c.Forget(pod("other", "h", "", 100)) },
			wantAgainst: []string{}},
		{name: "a pod being deleted claims nothing", do: func(c *Claims) bool {
			c.Set(pod("d", "", "n1", 200))
			d := pod("d", "", "n1", 200)
			d.DeletionTimestamp = &metav1.Time{}
			return c.Set(d)
		}, wantChanged: true, wantAgainst: []string{}, wantHas: map[string]bool{"d": false}},
	}
	var c Claims
	for _, s := range steps {
		if got := s.do(&c); got != s.wantChanged {
			t.Errorf("%s: changed = %v, want %v", s.name, got, s.wantChanged)
		}
		if diff := cmp.Diff(s.wantAgainst, names(c.Against(100, "ns/g"))); diff != "" {
			t.Errorf("%s: against (-want,+got): %s", s.name, diff)
		}
		// For a group whose job has group h too, h's members' nominations are no room taken.
		wantJob := slices.DeleteFunc(slices.Clone(s.wantAgainst), func(n string) bool { return n == "other" })
		if diff := cmp.Diff(wantJob, names(c.Against(100, "ns/g", "ns/h"))); diff != "" {
			t.Errorf("%s: against for a job with ns/h (-want,+got): %s", s.name, diff)
		}
		for uid, want := range s.wantHas {
			if got := c.Has(types.UID(uid)); got != want {
				t.Errorf("%s: Has(%s) = %v, want %v", s.name, uid, got, want)
			}
		}
		if got := c.Assumed(); got != s.wantAssumed {
			t.Errorf("%s: assumed = %d, want %d", s.name, got, s.wantAssumed)
		}
	}
}
