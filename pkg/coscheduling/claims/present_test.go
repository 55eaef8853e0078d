package claims

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSetIfPresent: a nomination is claimed only while the pod store still holds the pod live and
// unbound under the UID listed; a pod deleted (or replaced, bound, terminating) since it was listed
// leaves no claim behind (#48: nothing would ever forget it).
func TestSetIfPresent(t *testing.T) {
	listed := pod("m", "g", "n1", 100)
	other := pod("m", "g", "", 100)
	other.UID = "another"
	bound := pod("m", "g", "", 100)
	bound.Spec.NodeName = "n2"
	terminating := pod("m", "g", "", 100)
	terminating.DeletionTimestamp = &metav1.Time{}
	cases := []struct {
		name string
		cur  *v1.Pod
		want bool
	}{
		{"still in the store", pod("m", "g", "", 100), true},
		{"deleted since it was listed", nil, false},
		{"another pod under its name", other, false},
		{"bound since", bound, false},
		{"terminating since", terminating, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c Claims
			var sawClaim bool
			got := c.SetIfPresent(listed, func(p *v1.Pod) (*v1.Pod, bool) {
				// The claim is published before the store is read (see SetIfPresent).
				sawClaim = c.n.Load() == 1
				return tc.cur, tc.cur != nil
			})
			if got != tc.want || c.Has(listed.UID) != tc.want {
				t.Errorf("SetIfPresent = %v, Has = %v, want %v", got, c.Has(listed.UID), tc.want)
			}
			if !sawClaim {
				t.Error("the store was read before the claim was published: a delete in between would leave it")
			}
			if n := len(c.Against(0, "ns/other")); (n == 1) != tc.want {
				t.Errorf("%d claims against another gang, want %v", n, tc.want)
			}
		})
	}
	var c Claims
	if c.SetIfPresent(pod("m", "g", "", 100), func(*v1.Pod) (*v1.Pod, bool) { t.Fatal("store read for no nomination"); return nil, false }) {
		t.Error("a pod with no nomination was claimed")
	}
}
