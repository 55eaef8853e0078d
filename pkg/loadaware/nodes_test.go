package loadaware

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestParseThresholds(t *testing.T) {
	tests := []struct {
		value            string
		wantCPU, wantMem int64
		wantErr          string
	}{
		{value: "cpu=70,memory=85", wantCPU: 70, wantMem: 85},
		{value: " memory = 50 ", wantCPU: 80, wantMem: 50},
		{value: "cpu=0", wantCPU: 0, wantMem: 90},
		{value: "cpu=100,memory=0", wantCPU: 100, wantMem: 0},
		{value: "cpu=101", wantErr: "not a percentage"},
		{value: "cpu=-1", wantErr: "not a percentage"},
		{value: "cpu=7O", wantErr: "not a percentage"},
		{value: "cpu:70", wantErr: "not resource=percent"},
		{value: "", wantErr: "not resource=percent"},
		{value: "cpu=70,", wantErr: "not resource=percent"},
		{value: "gpu=70", wantErr: "unknown resource"},
		{value: "cpu=70,cpu=60", wantErr: "given twice"},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			cpu, mem, err := parseThresholds(tc.value, 80, 90)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || cpu != tc.wantCPU || mem != tc.wantMem {
				t.Errorf("parseThresholds = %d, %d, %v; want %d, %d", cpu, mem, err, tc.wantCPU, tc.wantMem)
			}
		})
	}
}

// recordingHandle records events.
type recordingHandle struct {
	fakeHandle
	recorder *fakeRecorder
}

func (h *recordingHandle) EventRecorder() events.EventRecorderLogger { return h.recorder }

type fakeRecorder struct {
	events.EventRecorderLogger
	notes []string
}

func (r *fakeRecorder) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, _ string, note string, args ...interface{}) {
	node := regarding.(*v1.Node)
	r.notes = append(r.notes, node.Name+" "+eventtype+" "+reason)
}

// TestNodeThresholdAnnotation: the annotation overrides the profile's thresholds for its node; a
// malformed one is ignored, logged once and reported once in an event on the node.
func TestNodeThresholdAnnotation(t *testing.T) {
	ctx := context.Background()
	annotated := func(name, value string) fwk.NodeInfo {
		ni := nodeInfo(name, "10", "10Gi")
		n := ni.Node()
		if value != "" {
			n.Annotations = map[string]string{ThresholdsAnnotation: value}
		}
		return ni
	}
	tests := []struct {
		name       string
		annotation string
		cpu        string // measured
		want       fwk.Code
		reason     string
	}{
		{name: "no annotation: the profile's 80%", cpu: "7500m", want: fwk.UnschedulableAndUnresolvable, reason: "exceeds the LoadAware threshold of 80 percent"},
		{name: "a lower threshold rejects sooner", annotation: "cpu=50", cpu: "5", want: fwk.UnschedulableAndUnresolvable, reason: "exceeds the node's LoadAware threshold (annotation " + ThresholdsAnnotation + ")"},
		{name: "a higher threshold lets more in", annotation: "cpu=95,memory=95", cpu: "8500m", want: fwk.Success},
		{name: "0 turns the node's check off", annotation: "cpu=0", cpu: "9900m", want: fwk.Success},
		{name: "memory only keeps the profile's cpu", annotation: "memory=99", cpu: "7500m", want: fwk.UnschedulableAndUnresolvable, reason: "exceeds the LoadAware threshold of 80 percent"},
		{name: "malformed: the profile's thresholds apply", annotation: "cpu=95%", cpu: "7500m", want: fwk.UnschedulableAndUnresolvable, reason: "exceeds the LoadAware threshold of 80 percent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newTestPlugin(t, defaultArgs(t))
			ni := annotated("n", tc.annotation)
			pl.addNodes(ni)
			pl.lister.set(epoch, map[string][2]string{"n": {tc.cpu, "1Gi"}})
			pl.refreshNow(t)
			pod := podWith("p", "1", "")
			cs := framework.NewCycleState()
			got := fwk.Success
			var msg string
			if _, s := pl.PreFilter(ctx, cs, pod, nil); s.IsSuccess() {
				st := pl.Filter(ctx, cs, pod, ni)
				got, msg = st.Code(), st.Message()
			} else if !s.IsSkip() {
				t.Fatalf("PreFilter: %v", s)
			}
			if got != tc.want || !strings.Contains(msg, tc.reason) {
				t.Errorf("Filter = %v %q, want %v %q", got, msg, tc.want, tc.reason)
			}
		})
	}

	t.Run("a malformed value is reported once per value", func(t *testing.T) {
		logger, _ := ktesting.NewTestContext(t)
		rec := &fakeRecorder{}
		h := &recordingHandle{fakeHandle: fakeHandle{factory: informers.NewSharedInformerFactory(nil, 0)}, recorder: rec}
		pl := newTestPlugin(t, defaultArgs(t))
		pl.handle, pl.profile = h, h.ProfileName()
		node := annotated("n", "cpu=lots").Node()
		for i := 0; i < 3; i++ {
			pl.onNodeUpsert(logger, node)
		}
		node.Annotations[ThresholdsAnnotation] = "cpu=70"
		pl.onNodeUpsert(logger, node)
		node.Annotations[ThresholdsAnnotation] = "cpu=lots"
		pl.onNodeUpsert(logger, node)
		want := "n Warning " + reasonBadAnnotation
		if len(rec.notes) != 2 || rec.notes[0] != want || rec.notes[1] != want {
			t.Errorf("events %q, want two %q (once, and again after a good value in between)", rec.notes, want)
		}
	})
}

func TestQueueingHintOnAnnotation(t *testing.T) {
	logger := klog.Background()
	pl := newTestPlugin(t, defaultArgs(t))
	plain := st.MakeNode().Name("n").Obj()
	annotated := plain.DeepCopy()
	annotated.Annotations = map[string]string{ThresholdsAnnotation: "cpu=95"}
	other := plain.DeepCopy()
	other.Annotations = map[string]string{"unrelated": "x"}
	pod := podWith("p", "1", "")
	if h, _ := pl.isSchedulableAfterNodeChange(logger, pod, plain, annotated); h != fwk.Queue {
		t.Errorf("threshold annotation added: %v, want Queue", h)
	}
	if h, _ := pl.isSchedulableAfterNodeChange(logger, pod, plain, other); h != fwk.QueueSkip {
		t.Errorf("unrelated annotation: %v, want QueueSkip", h)
	}
}

// TestRaisedThresholdRequeues: raising a node's threshold activates the pods it rejected, even when
// the scheduler retried them before this plugin saw the node update.
func TestRaisedThresholdRequeues(t *testing.T) {
	ctx := context.Background()
	logger, _ := ktesting.NewTestContext(t)
	h := &fakeHandle{factory: informers.NewSharedInformerFactory(nil, 0), activated: map[string]*v1.Pod{}}
	pl := newTestPlugin(t, defaultArgs(t))
	pl.handle, pl.profile = h, h.ProfileName()
	ni := nodeInfo("n", "10", "10Gi")
	node := ni.Node()
	node.Annotations = map[string]string{ThresholdsAnnotation: "cpu=60"}
	pl.onNodeUpsert(logger, node)
	pl.lister.set(epoch, map[string][2]string{"n": {"7", "1Gi"}})
	pl.refreshNow(t)
	pod := podWith("p", "1", "")
	cs := framework.NewCycleState()
	if _, s := pl.PreFilter(ctx, cs, pod, nil); !s.IsSuccess() {
		t.Fatalf("PreFilter = %v", s)
	}
	if s := pl.Filter(ctx, cs, pod, ni); s.IsSuccess() {
		t.Fatal("Filter passed a node over its annotated threshold")
	}
	lowered := node.DeepCopy()
	lowered.Annotations[ThresholdsAnnotation] = "cpu=50"
	pl.onNodeUpsert(logger, lowered)
	if len(h.activated) != 0 {
		t.Fatalf("a lowered threshold activated %v", h.activated)
	}
	raised := node.DeepCopy()
	raised.Annotations[ThresholdsAnnotation] = "cpu=90"
	pl.onNodeUpsert(logger, raised)
	if h.activated["p"] == nil {
		t.Fatalf("a raised threshold activated %v, want the rejected pod", h.activated)
	}
}
