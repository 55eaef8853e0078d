// Package interop runs the operators that create scheduler-plugins PodGroups (KubeRay, Kubeflow's
// Training Operator, the MPI Operator) for real, as subprocesses built from the pins in tools/*/go.mod,
// against envtest's kube-apiserver and etcd, kube-controller-manager (Jobs, garbage collection) and
// custom-scheduler as shipped (the binary with manifests/base/scheduler-config.yaml). No kubelet runs:
// a stand-in (kubeletStandIn) marks bound pods Running and finishes the deletion of terminating ones.
//
// This file is the shared harness; each operator has a file of its own, and podgroup_crd_test.go
// checks that our PodGroup CRD is a superset of scheduler-plugins'.
package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

const (
	schedulerName = "custom-scheduler"
	podGroupLabel = "scheduling.x-k8s.io/pod-group"
	// The fake nodes every test shares: nodeCount nodes of nodeCPU CPUs.
	nodeCount = 4
	nodeCPU   = 8
	// bindGrace is how long a bind may leave a gang partially bound: a gang that reached its quorum binds
	// its members one API call at a time, so the others follow within moments.
	bindGrace = 5 * time.Second
)

var podGroupGVR = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}

// The shared control plane, started by TestMain.
var (
	repoRoot   string
	scratchDir string
	testEnv    *envtest.Environment
	restConfig *rest.Config
	client     kubernetes.Interface
	dyn        dynamic.Interface
	kubeconfig string // an admin kubeconfig for the processes the tests run
	// The processes every test shares; their log tails are printed when a test fails.
	sharedProcs []*process
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// go test runs in the package's folder, test/interop (-trimpath leaves no source paths to use).
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	if scratchDir, err = os.MkdirTemp("", "interop-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop, err := startControlPlane()
	defer stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the control plane: %v\n", err)
		for _, p := range sharedProcs {
			fmt.Fprintf(os.Stderr, "%s log (tail):\n%s\n", p.name, tail(p.logText(), 40))
		}
		return 1
	}
	code := m.Run()
	if code == 0 {
		_ = os.RemoveAll(scratchDir)
	} else {
		fmt.Fprintf(os.Stderr, "logs of every process are kept in %s\n", scratchDir)
	}
	return code
}

// startControlPlane starts envtest with our PodGroup CRD, kube-controller-manager, the kubelet
// stand-in, custom-scheduler, and creates the nodes. The returned function stops what was started.
func startControlPlane() (func(), error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	assets, err := assetsDir()
	if err != nil {
		return stopAll, err
	}
	testEnv = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{Paths: []string{filepath.Join(repoRoot, "manifests", "crds", "scheduling.x-k8s.io_podgroups.yaml")}},
		ErrorIfCRDPathMissing: true,
	}
	if restConfig, err = testEnv.Start(); err != nil {
		return stopAll, fmt.Errorf("starting envtest with assets from %s: %w", assets, err)
	}
	stops = append(stops, func() { _ = testEnv.Stop() })
	restConfig.QPS, restConfig.Burst = 100, 200
	if client, err = kubernetes.NewForConfig(restConfig); err != nil {
		return stopAll, err
	}
	if dyn, err = dynamic.NewForConfig(restConfig); err != nil {
		return stopAll, err
	}
	user, err := testEnv.AddUser(envtest.User{Name: "interop-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return stopAll, err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return stopAll, err
	}
	kubeconfig = filepath.Join(scratchDir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return stopAll, err
	}

	// The Job controller runs the MPI launcher's Job; the StatefulSet controller LeaderWorkerSet's
	// leaders and workers; the garbage collector deletes what a deleted job owned.
	kcm, err := startProcess("kube-controller-manager", filepath.Join(assets, "kube-controller-manager"), nil,
		"--kubeconfig="+kubeconfig, "--controllers=job-controller,statefulset-controller,garbage-collector-controller",
		"--leader-elect=false", "--secure-port=0", "--v=2")
	if err != nil {
		return stopAll, err
	}
	sharedProcs = append(sharedProcs, kcm)
	stops = append(stops, kcm.stop)

	ctx, cancel := context.WithCancel(context.Background())
	kubeletDone := make(chan struct{})
	go func() { defer close(kubeletDone); kubeletStandIn(ctx) }()
	stops = append(stops, func() { cancel(); <-kubeletDone })

	// custom-scheduler as shipped: the binary and the manifests' configuration, pointed at envtest.
	// The shipped configuration leader-elects in namespace custom-scheduler.
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "custom-scheduler"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return stopAll, err
	}
	sched, err := startScheduler(ctx, "custom-scheduler", shippedConfig, "")
	if sched != nil {
		sharedProcs = append(sharedProcs, sched)
		stops = append(stops, sched.stop)
	}
	if err != nil {
		return stopAll, err
	}
	for i := range nodeCount {
		if err := createNode(ctx, fmt.Sprintf("node-%d", i), fmt.Sprint(nodeCPU)); err != nil {
			return stopAll, err
		}
	}
	return stopAll, nil
}

// assetsDir finds kube-apiserver, etcd and kube-controller-manager: KUBEBUILDER_ASSETS (which
// `make interop` sets), else the folder `make envtest` builds into.
func assetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	dirs, err := filepath.Glob(filepath.Join(repoRoot, "bin", "k8s", fmt.Sprintf("*-%s-%s", runtime.GOOS, runtime.GOARCH)))
	if err != nil {
		return "", err
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "kube-controller-manager")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("no kube-apiserver and kube-controller-manager under bin/k8s: run `make envtest` (or set KUBEBUILDER_ASSETS)")
}

// schedulerBinary is CUSTOM_SCHEDULER_BINARY (which `make interop` sets), else one built by `make build`.
func schedulerBinary() (string, error) {
	if p := os.Getenv("CUSTOM_SCHEDULER_BINARY"); p != "" {
		return p, nil
	}
	cmd := exec.Command("make", "build")
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make build: %w\n%s", err, b)
	}
	return filepath.Join(repoRoot, "bin", "custom-scheduler"), nil
}

// operatorBinary is bin/interop/NAME (INTEROP_BIN_DIR overrides the folder), built by
// `make interop-operators` from the pins in tools/*/go.mod when missing.
var buildOperators = sync.OnceValue(func() error {
	cmd := exec.Command("make", "interop-operators")
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make interop-operators: %w\n%s", err, tail(string(b), 30))
	}
	return nil
})

func operatorBinary(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("INTEROP_BIN_DIR")
	if dir == "" {
		dir = filepath.Join(repoRoot, "bin", "interop")
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		if err := buildOperators(); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// moduleDir is the module cache folder of modulePath at the version the tools module toolDir pins
// (tools/<toolDir>/go.mod), downloaded if needed: the operators' CRDs are read from there.
func moduleDir(t *testing.T, toolDir, modulePath string) string {
	t.Helper()
	return downloadModule(t, filepath.Join(repoRoot, "test", "interop", "tools", toolDir), modulePath)
}

// downloadModule is the module cache folder of module (a path, or path@version), as the Go module in
// dir resolves it (go mod download).
func downloadModule(t *testing.T, dir, module string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s in %s: %v\n%s%s", module, dir, err, out, stderr.String())
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: no Dir (%v %s): %s", module, err, m.Error, out)
	}
	return m.Dir
}

// The configurations custom-scheduler is run with: the shipped one, and the shipped one with the alias
// profile scheduler-plugins-scheduler (the kustomize component's, generated from the shipped one by
// hack/aliasconfig, the same copy the chart makes with schedulerPluginsAlias.enabled; test/chart checks
// both agree).
const (
	shippedConfig = "manifests/base/scheduler-config.yaml"
	aliasConfig   = "manifests/components/scheduler-plugins-alias/scheduler-config.yaml"
)

// startScheduler runs the custom-scheduler binary with the configuration file src (relative to the
// repository root) pointed at envtest, and waits until it leads. lease, when set, replaces the
// configuration's lease name (so that a second scheduler does not wait for the shared one's lease). The
// process is returned even when it failed to lead, for its log.
func startScheduler(ctx context.Context, name, src, lease string) (*process, error) {
	bin, err := schedulerBinary()
	if err != nil {
		return nil, err
	}
	cfgPath, err := schedulerConfig(name, src, lease)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	sched, err := startProcess(name, bin, nil, "--config="+cfgPath,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1", "--cert-dir="+filepath.Join(scratchDir, name+"-certs"), "--v=2")
	if err != nil {
		return nil, err
	}
	if err := poll(ctx, 60*time.Second, func(context.Context) (bool, error) {
		if sched.exited() {
			return false, errors.New(name + " exited")
		}
		return strings.Contains(sched.logText(), "Successfully acquired lease"), nil
	}); err != nil {
		return sched, fmt.Errorf("waiting for %s to lead: %w", name, err)
	}
	return sched, nil
}

// startTestScheduler runs a second custom-scheduler for one test, with the configuration src and a lease
// of its own; it is stopped when the test ends, its log tail printed if the test failed.
func startTestScheduler(t *testing.T, name, src string) *process {
	t.Helper()
	p, err := startScheduler(context.Background(), name, src, name)
	if p != nil {
		t.Cleanup(func() {
			p.stop()
			if t.Failed() {
				t.Logf("%s log (tail):\n%s", name, tail(p.logText(), 60))
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// schedulerConfig writes the configuration file src (relative to the repository root) with its client
// connection pointed at envtest (in a cluster it is the pod's in-cluster connection) and, when lease is
// set, that lease name.
func schedulerConfig(name, src, lease string) (string, error) {
	data, err := os.ReadFile(filepath.Join(repoRoot, src))
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return "", err
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	if lease != "" {
		le, _ := cfg["leaderElection"].(map[string]any)
		if le == nil {
			return "", fmt.Errorf("%s has no leaderElection to rename", src)
		}
		le["resourceName"] = lease
	}
	if data, err = yaml.Marshal(cfg); err != nil {
		return "", err
	}
	path := filepath.Join(scratchDir, name+"-config.yaml")
	return path, os.WriteFile(path, data, 0o600)
}

// process is a subprocess with its output in a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// startProcess runs bin with args (and env added to the test's environment), logging to the scratch dir.
func startProcess(name, bin string, env []string, args ...string) (*process, error) {
	logPath := filepath.Join(scratchDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	// Stop it if the test binary dies without running its cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("running %s: %w", bin, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *process) logText() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// startOperator runs an operator for one test: stopped when the test ends, its log tail (and the
// shared processes') printed if the test failed.
func startOperator(t *testing.T, name, bin string, env []string, args ...string) *process {
	t.Helper()
	p, err := startProcess(name, bin, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, tail(p.logText(), 60))
		}
	})
	return p
}

// logOnFailure prints the shared processes' log tails when the test fails.
func logOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range sharedProcs {
				t.Logf("%s log (tail):\n%s", p.name, tail(p.logText(), 40))
			}
		}
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func mustFreePort(t *testing.T) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// createNode creates a Ready node without taints (the apiserver's TaintNodesByCondition admission adds
// node.kubernetes.io/not-ready to a new node, and no node lifecycle controller runs to remove it).
func createNode(ctx context.Context, name, cpu string) error {
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")}
	node, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	node.Status = v1.NodeStatus{Capacity: capacity, Allocatable: capacity, Phase: v1.NodeRunning, Conditions: []v1.NodeCondition{{
		Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}}
	if node, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("marking node %s ready: %w", name, err)
	}
	node.Spec.Taints = nil
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("removing the taints of node %s: %w", name, err)
	}
	return nil
}

// kubeletStandIn does what the kubelets of the bound pods would, as far as the operators can see: a
// bound pending pod turns Running (and Ready), a terminating bound pod is deleted at once. A pod the
// test marked Failed or Succeeded stays so.
func kubeletStandIn(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*v1.Pod)
			if !ok || ev.Type == watch.Deleted || pod.Spec.NodeName == "" {
				continue
			}
			switch {
			case pod.DeletionTimestamp != nil:
				_ = client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
					GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
			case pod.Status.Phase == v1.PodPending || pod.Status.Phase == "":
				markRunning(ctx, pod)
			}
		}
		w.Stop()
	}
}

func markRunning(ctx context.Context, pod *v1.Pod) {
	pod = pod.DeepCopy()
	now := metav1.Now()
	pod.Status.Phase = v1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.PodIP = "10.0.0.1"
	pod.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.1"}}
	for _, ct := range []v1.PodConditionType{v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
		setCondition(pod, v1.PodCondition{Type: ct, Status: v1.ConditionTrue, LastTransitionTime: now})
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		})
	}
	_, _ = client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// markFailed ends a pod as its containers exiting 1 would.
func markFailed(t *testing.T, ns, name string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		pod.Status.Phase = v1.PodFailed
		setCondition(pod, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: now})
		setCondition(pod, v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, LastTransitionTime: now})
		for i := range pod.Status.ContainerStatuses {
			cs := &pod.Status.ContainerStatuses[i]
			cs.Ready = false
			cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: now}}
		}
		_, err = client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("marking pod %s/%s failed: %v", ns, name, err)
	}
}

func setCondition(pod *v1.Pod, c v1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// testNamespace creates a namespace for one test, watched by the gang invariant (watchGangs) for the
// whole test; on failure its pods, PodGroups and events are logged.
func testNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := createNamespace(t, prefix)
	watchGangs(t, ns)
	return ns
}

// createNamespace creates a namespace for one test, not watched by the gang invariant.
func createNamespace(t *testing.T, prefix string) string {
	t.Helper()
	logOnFailure(t)
	ctx := context.Background()
	ns := prefix + "-" + rand.String(5)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(dumpNamespace(ns))
		}
		_ = client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
		_ = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	return ns
}

func dumpNamespace(ns string) string {
	ctx := context.Background()
	var b strings.Builder
	fmt.Fprintf(&b, "namespace %s:\n", ns)
	if pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			msg := ""
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
					msg = c.Message
				}
			}
			fmt.Fprintf(&b, "  pod %s group=%q scheduler=%s node=%q phase=%s deleting=%v %s\n", p.Name, p.Labels[podGroupLabel],
				p.Spec.SchedulerName, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil, msg)
		}
	}
	if pgs, err := dyn.Resource(podGroupGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, pg := range pgs.Items {
			spec, _ := json.Marshal(pg.Object["spec"])
			status, _ := json.Marshal(pg.Object["status"])
			fmt.Fprintf(&b, "  podgroup %s spec=%s status=%s\n", pg.GetName(), spec, status)
		}
	}
	if evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].LastTimestamp.Before(&evs.Items[j].LastTimestamp) })
		for _, e := range evs.Items {
			fmt.Fprintf(&b, "  event %s/%s %s: %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	return b.String()
}

// poll runs cond every 200ms until it returns true or an error, or the timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond)
}

// waitFor fails the test if cond does not hold within timeout, or at once when it returns an error
// (conditions that expect an object to be missing for a while use ignoreNotFound).
func waitFor(t *testing.T, what string, timeout time.Duration, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := poll(context.Background(), timeout, cond); err != nil {
		t.Fatalf("waiting %v for %s: %v", timeout, what, err)
	}
}

// applyFile server-side applies every object of a (multi-document) YAML file, as `kubectl apply
// --server-side` does (the operators' CRDs are too large for a client-side apply's annotation), and
// waits for CRDs to be served.
func applyFile(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return applyYAML(t, data)
}

func applyYAML(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	cl, err := ctrlclient.New(restConfig, ctrlclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding YAML: %v", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := cl.Apply(context.Background(), ctrlclient.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
			ctrlclient.FieldOwner("custom-scheduler-interop-tests"), ctrlclient.ForceOwnership); err != nil {
			t.Fatalf("server-side apply of %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			waitForCRD(t, obj.GetName())
		}
		objs = append(objs, obj)
	}
	return objs
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// waitForCRD waits until the apiserver serves the CRD's resource.
func waitForCRD(t *testing.T, name string) {
	t.Helper()
	waitFor(t, "CRD "+name+" to be established", 30*time.Second, func(ctx context.Context) (bool, error) {
		crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// deleteCRDs deletes the CRDs the test applied when it ends (and waits until they are gone), so that a
// later test may install another CRD of the same name (the Training and MPI operators' MPIJob).
func deleteCRDsAtEnd(t *testing.T, objs []*unstructured.Unstructured) {
	t.Cleanup(func() {
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			_ = dyn.Resource(crdGVR).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			_ = poll(context.Background(), 60*time.Second, func(ctx context.Context) (bool, error) {
				_, err := dyn.Resource(crdGVR).Get(ctx, o.GetName(), metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
		}
	})
}

// createObject creates a custom object from YAML in namespace ns.
func createObject(t *testing.T, gvr schema.GroupVersionResource, ns, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatalf("parsing %s: %v", gvr.Resource, err)
	}
	created, err := dyn.Resource(gvr).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvr.Resource, ns, obj.GetName(), err)
	}
	return created
}

// readExample reads a file under examples/operators/.
func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "examples", "operators", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// groupPods lists the pods labelled with the PodGroup name.
func groupPods(ctx context.Context, ns, group string) ([]v1.Pod, error) {
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podGroupLabel + "=" + group})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func liveAndBound(p *v1.Pod) bool {
	return p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

func live(p *v1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

// waitGangBound waits until the group has exactly want live pods, all of them bound.
func waitGangBound(t *testing.T, ns, group string, want int) []v1.Pod {
	t.Helper()
	var pods []v1.Pod
	waitFor(t, fmt.Sprintf("the %d live pods of %s/%s to be bound", want, ns, group), 120*time.Second, func(ctx context.Context) (bool, error) {
		all, err := groupPods(ctx, ns, group)
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		bound := 0
		for _, p := range all {
			if live(&p) {
				pods = append(pods, p)
				if p.Spec.NodeName != "" {
					bound++
				}
			}
		}
		return len(pods) == want && bound == want, nil
	})
	return pods
}

// waitGangHeld waits until the group has want live pods, each unschedulable with a message from our
// plugin naming the PodGroup, and checks none is bound; it returns one such message.
func waitGangHeld(t *testing.T, ns, group string, want int) string {
	t.Helper()
	var msg string
	waitFor(t, fmt.Sprintf("the %d pods of %s/%s to be pending with Coscheduling's reason", want, ns, group), 120*time.Second, func(ctx context.Context) (bool, error) {
		all, err := groupPods(ctx, ns, group)
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range all {
			if !live(&p) {
				continue
			}
			if p.Spec.NodeName != "" {
				return false, fmt.Errorf("pod %s of a gang that cannot fit was bound to %s", p.Name, p.Spec.NodeName)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable &&
					strings.Contains(c.Message, "PodGroup "+ns+"/"+group) {
					n++
					msg = c.Message
				}
			}
		}
		return n == want, nil
	})
	// Still nothing bound a while later.
	time.Sleep(2 * time.Second)
	all, err := groupPods(context.Background(), ns, group)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s/%s of a gang that cannot fit was bound to %s", ns, p.Name, p.Spec.NodeName)
		}
	}
	return msg
}

// getPodGroup reads a PodGroup.
func getPodGroup(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	return dyn.Resource(podGroupGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// waitPodGroup waits for the PodGroup to exist and returns it.
func waitPodGroup(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	var pg *unstructured.Unstructured
	waitFor(t, "PodGroup "+ns+"/"+name, 120*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		pg, err = getPodGroup(ctx, ns, name)
		return err == nil, ignoreNotFound(err)
	})
	return pg
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// podGroupSpec is the part of a PodGroup's spec the operators write.
type podGroupSpec struct {
	MinMember              int64
	MinResources           map[string]string
	ScheduleTimeoutSeconds *int64
}

func specOf(t *testing.T, pg *unstructured.Unstructured) podGroupSpec {
	t.Helper()
	var s podGroupSpec
	s.MinMember, _, _ = unstructured.NestedInt64(pg.Object, "spec", "minMember")
	s.MinResources, _, _ = unstructured.NestedStringMap(pg.Object, "spec", "minResources")
	if v, ok, _ := unstructured.NestedInt64(pg.Object, "spec", "scheduleTimeoutSeconds"); ok {
		s.ScheduleTimeoutSeconds = &v
	}
	return s
}

// quantityEqual compares resource quantities by value ("3" == "3000m").
func quantityEqual(a, b string) bool {
	qa, errA := resource.ParseQuantity(a)
	qb, errB := resource.ParseQuantity(b)
	return errA == nil && errB == nil && qa.Cmp(qb) == 0
}

// waitEvent waits for an event of reason on the object whose message contains substr, and returns it.
func waitEvent(t *testing.T, ns, object, reason, substr string, timeout time.Duration) v1.Event {
	t.Helper()
	var found v1.Event
	waitFor(t, fmt.Sprintf("a %s event on %s/%s saying %q", reason, ns, object, substr), timeout, func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == object && e.Reason == reason && strings.Contains(e.Message, substr) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// deletePod deletes a pod at once, as a kubelet confirming its containers stopped would.
func deletePod(t *testing.T, ns, name string) {
	t.Helper()
	if err := client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatalf("deleting pod %s/%s: %v", ns, name, err)
	}
}

// waitNoPods waits until no pod of the group is left (the garbage collector or the operator deleted
// them, the kubelet stand-in finished their termination).
func waitNoPods(t *testing.T, ns, group string) {
	t.Helper()
	waitFor(t, "no pod of "+ns+"/"+group+" left", 120*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := groupPods(ctx, ns, group)
		return len(pods) == 0, err
	})
}

// gangWatch polls the namespace's PodGroups and their pods throughout a test and records every
// violation of the gang invariant: a PodGroup with between 1 and minMember-1 live members bound
// (live: not deleted, not terminating, not finished) for longer than bindGrace. Only a bind starts
// such an episode: a member that the test (or an operator scaling down) deletes or fails leaves a
// gang below its quorum by somebody else's doing, not the scheduler's; a replacement completes it.
type gangWatch struct {
	ns         string
	stopCh     chan struct{}
	done       chan struct{}
	violations []string
	longest    time.Duration
	polls      int
	// failed counts polls whose List calls failed, and lastErr is the last such error: a watch whose
	// every poll failed saw nothing and must not pass.
	failed  int
	lastErr error
}

type episode struct {
	since    time.Time
	cause    string
	reported bool
}

func startGangWatch(ns string) *gangWatch {
	w := &gangWatch{ns: ns, stopCh: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *gangWatch) loop() {
	defer close(w.done)
	ctx := context.Background()
	last := map[string]int{}
	episodes := map[string]*episode{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.stopCh:
			return
		case <-tick.C:
		}
		pgs, err := dyn.Resource(podGroupGVR).Namespace(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			w.failed, w.lastErr = w.failed+1, err
			continue
		}
		pods, err := client.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			w.failed, w.lastErr = w.failed+1, err
			continue
		}
		w.polls++
		bound := map[string][]string{}
		for i := range pods.Items {
			p := &pods.Items[i]
			if g := groupOf(p); g != "" && liveAndBound(p) {
				bound[g] = append(bound[g], p.Name)
			}
		}
		now := time.Now()
		for _, pg := range pgs.Items {
			name := pg.GetName()
			minMember, found, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
			if !found {
				minMember = 1
			}
			n := len(bound[name])
			prev := last[name]
			last[name] = n
			ep := episodes[name]
			switch {
			case n == 0 || int64(n) >= minMember:
				if ep != nil {
					w.longest = max(w.longest, now.Sub(ep.since))
					delete(episodes, name)
				}
			case ep == nil && n > prev:
				sort.Strings(bound[name])
				episodes[name] = &episode{since: now, cause: fmt.Sprintf("%d of minMember %d live members bound (%v)", n, minMember, bound[name])}
			case ep != nil && !ep.reported && now.Sub(ep.since) > bindGrace:
				ep.reported = true
				sort.Strings(bound[name])
				w.violations = append(w.violations, fmt.Sprintf("PodGroup %s/%s partially bound for more than %v: started with %s, now %d of %d bound (%v)",
					w.ns, name, bindGrace, ep.cause, n, minMember, bound[name]))
			}
		}
	}
}

// groupOf is the PodGroup of a pod: the one its label names, else its LeaderWorkerSet replica's (the
// set's name and the replica's index, as LWS labels it: the PodGroup the scheduler makes for it).
func groupOf(p *v1.Pod) string {
	if g := p.Labels[podGroupLabel]; g != "" {
		return g
	}
	if set, r := p.Labels[lwsNameLabel], p.Labels[lwsGroupIndexLabel]; set != "" && r != "" {
		return set + "-" + r
	}
	return ""
}

// stop ends the watch and returns its violations.
func (w *gangWatch) stop() []string {
	close(w.stopCh)
	<-w.done
	return w.violations
}

// watchGangs checks the gang invariant in namespace ns until the test ends.
func watchGangs(t *testing.T, ns string) {
	w := startGangWatch(ns)
	t.Cleanup(func() {
		violations := w.stop()
		t.Logf("gang invariant in %s: %d polls, longest partial episode %v (allowed %v)", ns, w.polls, w.longest.Round(time.Millisecond), bindGrace)
		for _, v := range violations {
			t.Errorf("gang invariant violated: %s", v)
		}
		if w.failed > w.polls {
			t.Errorf("gang invariant in %s not checked: %d of %d polls failed (last: %v)", ns, w.failed, w.failed+w.polls, w.lastErr)
		}
	})
}

func parseYAML(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatalf("parsing YAML: %v", err)
	}
	return obj
}

func toYAML(t *testing.T, obj *unstructured.Unstructured) string {
	t.Helper()
	b, err := yaml.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
