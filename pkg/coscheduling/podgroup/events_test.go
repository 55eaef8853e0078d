package podgroup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// TestEvents is a row per kind of scheduler: the events a member waits on, each with its hint; the
// device events only where devices are modelled, the in-tree PodGroups' only where they are served.
// No pod-added or claim-updated event (the plugin's own handlers let those members in).
func TestEvents(t *testing.T) {
	hint := func(name string) fwk.QueueingHintFn {
		return func(klog.Logger, *v1.Pod, interface{}, interface{}) (fwk.QueueingHint, error) {
			return fwk.Queue, &named{name}
		}
	}
	h := Hints{CapacityFreed: hint("capacity"), NodeChange: hint("node"), PodGroupChange: hint("podgroup"), OwnUpdate: hint("own"), DeviceChange: hint("device")}
	type ev struct {
		Resource fwk.EventResource
		Action   fwk.ActionType
		Hint     string
	}
	base := []ev{{fwk.AssignedPod, fwk.Delete | fwk.UpdatePodScaleDown, "capacity"},
		{fwk.Node, fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint, "node"},
		{EventResource, fwk.Add | fwk.Update, "podgroup"}, {fwk.TargetPod, fwk.Update, "own"}}
	devices := []ev{{fwk.ResourceSlice, fwk.Add | fwk.Update, "device"}, {fwk.DeviceClass, fwk.Add | fwk.Update, "device"}}
	inTree := []ev{{InTreeEventResource, fwk.Add | fwk.Update, "podgroup"}}
	for _, tc := range []struct {
		name            string
		devices, inTree bool
		want            []ev
	}{
		{"no devices, no in-tree PodGroups", false, false, base},
		{"devices modelled", true, false, append(append([]ev{}, base...), devices...)},
		{"in-tree PodGroups served", false, true, append(append([]ev{}, base...), inTree...)},
		{"both", true, true, append(append(append([]ev{}, base...), devices...), inTree...)},
	} {
		var got []ev
		for _, e := range Events(h, tc.devices, tc.inTree) {
			_, err := e.QueueingHintFn(klog.Background(), nil, nil, nil)
			got = append(got, ev{e.Event.Resource, e.Event.ActionType, err.(*named).name})
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: Events (-want,+got):\n%s", tc.name, diff)
		}
	}
}

// named tells which hint an event carries.
type named struct{ name string }

func (n *named) Error() string { return n.name }
