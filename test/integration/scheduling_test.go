package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestScheduling covers what every pod of ours goes through: it is bound, pods of other schedulers are
// left alone, and a pod that fits nowhere is reported with the reason.
func TestScheduling(t *testing.T) {
	ns := testNamespace(t)
	createNode(t, "small-node", "2", "4Gi", nil)
	startScheduler(t, schedulerConfig(t, adminKubeconfig, defaultProfiles))

	t.Run("our pod is bound to a fitting node", func(t *testing.T) {
		pod := createPod(t, st.MakePod().Namespace(ns).Name("fits").SchedulerName(schedulerName).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).Container("pause").Obj())
		if node := waitForPodBound(t, ns, pod.Name); node != "small-node" {
			t.Fatalf("pod bound to %q, want small-node", node)
		}
		waitForEvent(t, ns, pod.Name, "Scheduled", schedulerName)
	})

	t.Run("a default-scheduler pod is left untouched", func(t *testing.T) {
		pod := createPod(t, st.MakePod().Namespace(ns).Name("not-ours").SchedulerName(v1.DefaultSchedulerName).Container("pause").Obj())
		// Our pod created afterwards is scheduled, so the scheduler has seen the other one by then.
		marker := createPod(t, st.MakePod().Namespace(ns).Name("marker").SchedulerName(schedulerName).Container("pause").Obj())
		waitForPodBound(t, ns, marker.Name)
		consistently(t, 2*time.Second, "the default-scheduler pod stays unbound with no condition from us", func(ctx context.Context) (bool, error) {
			got, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return got.Spec.NodeName == "" && len(got.Status.Conditions) == 0, nil
		})
		events, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == pod.Name {
				t.Errorf("unexpected event about the default-scheduler pod: %s %s from %s", e.Reason, e.Message, eventSource(&e))
			}
		}
	})

	t.Run("a pod that fits nowhere is reported unschedulable", func(t *testing.T) {
		pod := createPod(t, st.MakePod().Namespace(ns).Name("too-big").SchedulerName(schedulerName).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "64"}).Container("pause").Obj())
		message := waitForPodUnschedulable(t, ns, pod.Name)
		if !strings.Contains(message, "Insufficient cpu") {
			t.Errorf("PodScheduled message %q does not say why (want Insufficient cpu)", message)
		}
		event := waitForEvent(t, ns, pod.Name, "FailedScheduling", schedulerName)
		if !strings.Contains(event.Message, "Insufficient cpu") {
			t.Errorf("FailedScheduling event %q does not say why", event.Message)
		}
	})
}

// TestBadConfigStopsTheBinary runs the real binary with broken configuration files: each must exit
// non-zero, before connecting anywhere, with an error naming the problem.
func TestBadConfigStopsTheBinary(t *testing.T) {
	cases := []struct {
		name string
		// config is a whole file; profiles, when set, go into a valid file instead.
		config   string
		profiles string
		want     []string
	}{
		{
			name:   "not YAML",
			config: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: [\n",
			want:   []string{"yaml"},
		},
		{
			name:   "unknown field",
			config: "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofilez: []\n",
			want:   []string{"unknown field", "profilez"},
		},
		{
			name: "unknown plugin",
			profiles: `  - schedulerName: custom-scheduler
    plugins:
      filter:
        enabled:
          - name: NoSuchPlugin
`,
			want: []string{"NoSuchPlugin", "does not exist"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "config.yaml", tc.config)
			if tc.profiles != "" {
				path = schedulerConfig(t, adminKubeconfig, tc.profiles)
			}
			err, out := runBinary(t, time.Minute, "--config="+path, "--secure-port=0")
			if code := exitCode(err); code == 0 || code == -1 {
				t.Fatalf("exit code %d (%v), want a non-zero exit; output:\n%s", code, err, tail(out, 20))
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not name the problem (want %q):\n%s", w, tail(out, 20))
				}
			}
		})
	}
}

// TestBinaryHelp checks that the binary takes kube-scheduler's flags.
func TestBinaryHelp(t *testing.T) {
	err, out := runBinary(t, time.Minute, "--help")
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, tail(out, 20))
	}
	for _, flag := range []string{"--config", "--kubeconfig", "--leader-elect", "--secure-port", "--feature-gates", "--v "} {
		if !strings.Contains(out, flag) {
			t.Errorf("--help does not list %s", flag)
		}
	}
}

// TestBinaryVersion checks that the binary reports the Kubernetes version it is built on and ours.
func TestBinaryVersion(t *testing.T) {
	err, out := runBinary(t, time.Minute, "--version")
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	// The Kubernetes version first (the scheduler derives its emulation version from it), ours after.
	if !strings.HasPrefix(out, "Kubernetes v1.37.") || !strings.Contains(out, "+custom-scheduler.") {
		t.Errorf("--version printed %q, want Kubernetes v1.37.x+custom-scheduler.<version>", out)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
