package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	apiservercompatibility "k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/compatibility"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/utils/ptr"

	"github.com/custom-scheduler/custom-scheduler/pkg/registry"
)

const (
	schedulerName = "custom-scheduler"
	// waitTimeout bounds every wait in these tests; a wait that runs out fails with a dump.
	waitTimeout = 60 * time.Second
)

// configTemplate renders a KubeSchedulerConfiguration for a scheduler under test. Profiles is the
// YAML list under `profiles:`, indented by two spaces.
var configTemplate = template.Must(template.New("config").Parse(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {{.Kubeconfig}}
leaderElection:
  leaderElect: false
profiles:
{{.Profiles}}`))

// defaultProfiles is our profile with the default plugin set and the out-of-tree plugins that need
// no extra set-up.
const defaultProfiles = `  - schedulerName: custom-scheduler
`

// schedulerConfig renders a configuration file with the given profiles and returns its path.
func schedulerConfig(t *testing.T, kubeconfig, profiles string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := configTemplate.Execute(&buf, map[string]string{"Kubeconfig": kubeconfig, "Profiles": profiles}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runningScheduler is a scheduler started in this process from a config file.
type runningScheduler struct {
	cancel context.CancelFunc
	done   chan error
	log    *lockedBuffer
}

// inProcessMu serializes in-process schedulers: the scheduler registers process-wide state (configz)
// that only one instance at a time may own. Tests that need two schedulers at once run the binary.
var inProcessMu sync.Mutex

// startScheduler runs the scheduler command path in this process, from flags and a config file, with
// our registry, until the test ends or stop is called. It returns once the scheduler's caches synced.
func startScheduler(t *testing.T, configFile string, extraFlags ...string) *runningScheduler {
	t.Helper()
	inProcessMu.Lock()
	logBuf := &lockedBuffer{}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(logBuf), textlogger.Verbosity(4)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	s := &runningScheduler{cancel: cancel, done: make(chan error, 1), log: logBuf}

	opts := options.NewOptionsWithComponentGlobalsRegistry(newComponentGlobalsRegistry(t))
	fs := pflag.NewFlagSet("custom-scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	args := append([]string{"--config=" + configFile, "--secure-port=0"}, extraFlags...)
	if err := fs.Parse(args); err != nil {
		inProcessMu.Unlock()
		t.Fatalf("parsing scheduler flags %v: %v", args, err)
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		inProcessMu.Unlock()
		t.Fatalf("setting component globals: %v", err)
	}
	cc, sched, err := app.Setup(ctx, opts, registry.Options()...)
	if err != nil {
		cancel()
		inProcessMu.Unlock()
		t.Fatalf("setting up the scheduler from %s: %v", configFile, err)
	}
	go func() {
		s.done <- app.Run(ctx, cc, sched)
		configz.Delete("componentconfig")
		inProcessMu.Unlock()
	}()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("scheduler log (tail):\n%s", tail(logBuf.String(), logTail()))
		}
	})
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return sched.WaitForHandlersSync(ctx) == nil, nil
	}); err != nil {
		t.Fatalf("scheduler caches did not sync: %v\n%s", err, tail(logBuf.String(), 40))
	}
	return s
}

// stop ends the scheduler and waits for it to return; calling it twice is harmless.
func (s *runningScheduler) stop() {
	s.cancel()
	if s.done != nil {
		<-s.done
		s.done = nil
	}
}

func newComponentGlobalsRegistry(t *testing.T) compatibility.ComponentGlobalsRegistry {
	t.Helper()
	reg := compatibility.NewComponentGlobalsRegistry()
	featureGate := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	if err := reg.Register(compatibility.DefaultKubeComponent, apiservercompatibility.DefaultBuildEffectiveVersion(), featureGate); err != nil {
		t.Fatalf("registering component globals: %v", err)
	}
	return reg
}

// binaryPath is the custom-scheduler binary under test: CUSTOM_SCHEDULER_BINARY (which `make test`
// sets to the binary it just built), else one built here once per run by `make build`.
var binaryPath = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("CUSTOM_SCHEDULER_BINARY"); p != "" {
		return p, nil
	}
	cmd := exec.Command("make", "build")
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make build: %w\n%s", err, b)
	}
	return filepath.Join(repoRoot, "bin", "custom-scheduler"), nil
})

// runBinary runs the custom-scheduler binary with args until it exits or the timeout passes, and
// returns its exit error and combined output.
func runBinary(t *testing.T, timeout time.Duration, args ...string) (error, string) {
	t.Helper()
	bin, err := binaryPath()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("custom-scheduler %v still running after %v:\n%s", args, timeout, tail(string(out), 40))
	}
	return err, string(out)
}

// testNamespace creates a namespace for one test; its pods are deleted when the test ends, and on
// failure the namespace's pods and events are dumped.
func testNamespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test-" + rand.String(6)}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(dumpNamespace(ns.Name))
		}
		// No kubelet runs here: delete pods at once rather than waiting for a graceful stop.
		if err := client.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting pods of %s: %v", ns.Name, err)
		}
		_ = client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// createNode creates a schedulable Node with the given capacity, marks it Ready and removes the
// not-ready taint that the apiserver's TaintNodesByCondition admission adds to every new Node (no
// node lifecycle controller runs here to remove it). The Node is deleted when the test ends.
func createNode(t *testing.T, name, cpu, memory string, labels map[string]string) *v1.Node {
	t.Helper()
	return createNodeIn(t, client, name, cpu, memory, labels)
}

// createNodeIn is createNode on the cluster of client.
func createNodeIn(t *testing.T, client kubernetes.Interface, name, cpu, memory string, labels map[string]string) *v1.Node {
	t.Helper()
	ctx := context.Background()
	node, err := makeReadyNode(ctx, client, name, cpu, memory, labels)
	if node != nil {
		t.Cleanup(func() {
			if err := client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting node %s: %v", name, err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// makeReadyNode creates a schedulable Node with the given capacity, marks it Ready and removes the
// not-ready taint (see createNode). The node is returned once created, with an error if a later step
// failed.
func makeReadyNode(ctx context.Context, client kubernetes.Interface, name, cpu, memory string, labels map[string]string) (*v1.Node, error) {
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(cpu),
		v1.ResourceMemory: resource.MustParse(memory),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	node, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating node %s: %w", name, err)
	}
	created := node
	node.Status = v1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       v1.NodeRunning,
		Conditions: []v1.NodeCondition{{
			Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	node, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		return created, fmt.Errorf("marking node %s ready: %w", name, err)
	}
	var taints []v1.Taint
	for _, taint := range node.Spec.Taints {
		if taint.Key != v1.TaintNodeNotReady {
			taints = append(taints, taint)
		}
	}
	node.Spec.Taints = taints
	node, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		return created, fmt.Errorf("removing the not-ready taint from node %s: %w", name, err)
	}
	return node, nil
}

// createPod creates a pod and returns the created object.
func createPod(t *testing.T, pod *v1.Pod) *v1.Pod {
	t.Helper()
	created, err := client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return created
}

// waitFor polls cond until it holds or waitTimeout passes; on timeout the test fails with what
// (a description) and the namespace dump.
func waitFor(t *testing.T, ns, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitForPodBound waits until the pod has a node and returns that node's name.
func waitForPodBound(t *testing.T, ns, name string) string {
	t.Helper()
	var nodeName string
	waitFor(t, ns, fmt.Sprintf("pod %s/%s to be bound", ns, name), func(ctx context.Context) (bool, error) {
		pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		nodeName = pod.Spec.NodeName
		return nodeName != "", nil
	})
	return nodeName
}

// waitForPodUnschedulable waits until the scheduler reported the pod PodScheduled=False/Unschedulable,
// and returns the condition's message.
func waitForPodUnschedulable(t *testing.T, ns, name string) string {
	t.Helper()
	var message string
	waitFor(t, ns, fmt.Sprintf("pod %s/%s to be reported unschedulable", ns, name), func(ctx context.Context) (bool, error) {
		pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				message = c.Message
				return true, nil
			}
		}
		return false, nil
	})
	return message
}

// waitForEvent waits for an event about the named object with the given reason, reported by
// reportingController (any when empty), and returns it.
func waitForEvent(t *testing.T, ns, objectName, reason, reportingController string) *v1.Event {
	t.Helper()
	var found *v1.Event
	waitFor(t, ns, fmt.Sprintf("a %s event for %s/%s from %s", reason, ns, objectName, reportingController), func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range events.Items {
			e := &events.Items[i]
			if e.InvolvedObject.Name == objectName && e.Reason == reason && (reportingController == "" || eventSource(e) == reportingController) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// eventSource is the component that reported an event, in either event API's field.
func eventSource(e *v1.Event) string {
	if e.ReportingController != "" {
		return e.ReportingController
	}
	return e.Source.Component
}

// consistently checks that cond keeps holding for the whole duration.
func consistently(t *testing.T, d time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ok, err := cond(ctx)
		if err != nil {
			t.Fatalf("checking that %s: %v", what, err)
		}
		if !ok {
			t.Fatalf("expected %s for %v, but it stopped holding", what, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dumpNamespace describes every pod of a namespace with its conditions, and the namespace's events.
func dumpNamespace(ns string) string {
	ctx := context.Background()
	var b strings.Builder
	fmt.Fprintf(&b, "--- namespace %s\n", ns)
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "listing pods: %v\n", err)
	} else {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s scheduler=%s node=%q phase=%s\n", p.Name, p.Spec.SchedulerName, p.Spec.NodeName, p.Status.Phase)
			for _, c := range p.Status.Conditions {
				fmt.Fprintf(&b, "  condition %s=%s reason=%s message=%q\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "listing events: %v\n", err)
	} else {
		for _, e := range events.Items {
			fmt.Fprintf(&b, "event %s/%s %s %s from %s: %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Type, e.Reason, eventSource(&e), e.Message)
		}
	}
	return b.String()
}

// lockedBuffer collects a scheduler's log safely across goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

var _ io.Writer = &lockedBuffer{}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// exitCode is the exit status of a finished command, or -1.
func exitCode(err error) int {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// logTail is how many lines of a failed test's scheduler log are printed (SCHEDULER_LOG_LINES, else 60).
func logTail() int {
	if n, err := strconv.Atoi(os.Getenv("SCHEDULER_LOG_LINES")); err == nil && n > 0 {
		return n
	}
	return 60
}
