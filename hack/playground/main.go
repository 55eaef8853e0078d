// Command playground runs custom-scheduler against a local control plane with simulated nodes, so it
// can be tried with no cluster: etcd and kube-apiserver (through envtest), kwok to make nodes Ready and
// bound pods Running, and the custom-scheduler binary with the scheduler configuration from
// manifests/. It creates fake nodes and the sample workloads in examples/playground, prints where they
// landed and how to reach the cluster with kubectl, and stops everything it started on Ctrl-C.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	kwoknodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	kwokheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	kwokpodfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/test/fakemetrics"
)

const kwokAnnotation = "kwok.x-k8s.io/node"

func main() {
	var (
		assets    = flag.String("assets", "", "folder with kube-apiserver, etcd, kubectl and kwok (hack/envtest-assets.sh --all)")
		scheduler = flag.String("scheduler", "bin/custom-scheduler", "the custom-scheduler binary")
		config    = flag.String("config", "manifests/base/scheduler-config.yaml", "KubeSchedulerConfiguration to run (its clientConnection is pointed at the playground)")
		workloads = flag.String("workloads", "examples/playground", "folder of YAML objects to create once the scheduler runs")
		dir       = flag.String("dir", "_output/playground", "folder for the kubeconfig, configuration and logs")
		nodes     = flag.Int("nodes", 4, "how many fake nodes to create")
		exitAfter = flag.Duration("exit-after", 0, "stop by itself after this long (0: run until Ctrl-C)")
	)
	flag.Parse()
	// Output piped into a pager or tee that is gone must not kill the playground before it cleans up.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *exitAfter > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *exitAfter)
		defer cancel()
	}
	if err := run(ctx, *assets, *scheduler, *config, *workloads, *dir, *nodes); err != nil {
		fmt.Fprintf(os.Stderr, "playground: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, assets, schedulerBin, configPath, workloadsDir, dir string, nodeCount int) error {
	if assets == "" {
		return errors.New("--assets is required (make run passes it)")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	fmt.Printf("Playground folder: %s (logs in %s)\n", dir, logs)

	apiserverLog, err := os.Create(filepath.Join(logs, "kube-apiserver.log"))
	if err != nil {
		return err
	}
	defer apiserverLog.Close()
	etcdLog, err := os.Create(filepath.Join(logs, "etcd.log"))
	if err != nil {
		return err
	}
	defer etcdLog.Close()

	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{"manifests/crds"},
		ErrorIfCRDPathMissing: false,
	}
	apiserver := env.ControlPlane.GetAPIServer()
	apiserver.Out, apiserver.Err = apiserverLog, apiserverLog
	// No node lifecycle controller runs here to lift the not-ready taint that this admission plugin puts
	// on new nodes; kwok reports the nodes Ready instead.
	apiserver.Configure().Append("disable-admission-plugins", "TaintNodesByCondition")
	env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdLog, Err: etcdLog}

	fmt.Println("Starting etcd and kube-apiserver...")
	restConfig, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		fmt.Println("Stopping kube-apiserver and etcd...")
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the control plane: %v\n", err)
		}
	}()
	user, err := env.AddUser(envtest.User{Name: "playground-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfigData, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kubeconfigData, 0o600); err != nil {
		return err
	}
	clientset, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}

	kwokConfig := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfig, []byte(kwokConfiguration()), 0o600); err != nil {
		return err
	}
	kwok, err := startProcess(filepath.Join(assets, "kwok"), filepath.Join(logs, "kwok.log"),
		"--kubeconfig="+kubeconfig, "--config="+kwokConfig,
		"--manage-nodes-with-annotation-selector="+kwokAnnotation+"=fake")
	if err != nil {
		return err
	}
	defer kwok.stop()

	for i := 0; i < nodeCount; i++ {
		if err := createNode(ctx, clientset, fmt.Sprintf("kwok-node-%d", i), i); err != nil {
			return err
		}
	}
	fmt.Printf("Created %d fake nodes (8 CPU, 32Gi, 110 pods each).\n", nodeCount)

	// Simulated node usage behind metrics.k8s.io, as metrics-server would report it, for LoadAware.
	metrics, err := fakemetrics.Start(ctx, restConfig, metav1.NamespaceDefault, "playground-metrics-server")
	if err != nil {
		return fmt.Errorf("serving simulated node metrics: %w", err)
	}
	defer metrics.Close()
	go simulateUsage(ctx, clientset, metrics)
	fmt.Println("Serving simulated node usage through metrics.k8s.io (kwok-node-0 runs hot).")

	// The scheduler's leader-election lease lives in its own namespace, as in manifests/.
	if _, err := clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "custom-scheduler"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the custom-scheduler namespace: %w", err)
	}
	schedulerConfig := filepath.Join(dir, "scheduler-config.yaml")
	if err := writeSchedulerConfig(configPath, schedulerConfig, kubeconfig); err != nil {
		return err
	}
	scheduler, err := startProcess(schedulerBin, filepath.Join(logs, "custom-scheduler.log"),
		"--config="+schedulerConfig, "--secure-port=0", "--v=2")
	if err != nil {
		return err
	}
	defer scheduler.stop()

	objects, err := createWorkloads(ctx, restConfig, workloadsDir)
	if err != nil {
		return err
	}
	fmt.Printf("Created %d objects from %s.\n", objects, workloadsDir)

	// Give the scheduler a moment, then report where pods landed.
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	case err := <-scheduler.exited:
		return fmt.Errorf("custom-scheduler exited: %v; see %s", err, scheduler.logPath)
	}
	if err := printPlacement(ctx, clientset, restConfig); err != nil {
		return err
	}
	fmt.Printf(`
The playground is running.
  kubectl:   %s --kubeconfig %s get pods -A -o wide
  scheduler: tail -f %s
Press Ctrl-C to stop everything.
`, filepath.Join(assets, "kubectl"), kubeconfig, scheduler.logPath)

	select {
	case <-ctx.Done():
		fmt.Println("\nShutting down...")
		return nil
	case err := <-scheduler.exited:
		return fmt.Errorf("custom-scheduler exited: %v; see %s", err, scheduler.logPath)
	case err := <-kwok.exited:
		return fmt.Errorf("kwok exited: %v; see %s", err, kwok.logPath)
	}
}

// kwokConfiguration is kwok's configuration followed by the stages that make managed nodes Ready
// (and keep them so) and pods bound to them Running, as shipped in the kwok module.
func kwokConfiguration() string {
	options := `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  cidr: 10.0.0.1/24
  nodeIP: 10.0.0.1
  nodePlayStageParallelism: 4
  podPlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 4
`
	docs := []string{options, kwoknodefast.DefaultNodeInit, kwokheartbeat.DefaultNodeHeartbeat, kwokpodfast.DefaultPodReady, kwokpodfast.DefaultPodComplete, kwokpodfast.DefaultPodDelete}
	for i := range docs {
		docs[i] = strings.TrimSpace(docs[i])
	}
	return strings.Join(docs, "\n---\n") + "\n"
}

// writeSchedulerConfig copies the KubeSchedulerConfiguration with its client connection pointed at the
// playground.
func writeSchedulerConfig(src, dst, kubeconfig string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading the scheduler configuration: %w", err)
	}
	var cfg map[string]interface{}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("parsing %s: %w", src, err)
	}
	conn, _ := cfg["clientConnection"].(map[string]interface{})
	if conn == nil {
		conn = map[string]interface{}{}
	}
	conn["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = conn
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, out, 0o600)
}

func createNode(ctx context.Context, clientset kubernetes.Interface, name string, i int) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokAnnotation: "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname":      name,
				"topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i%2),
				"type":                        "kwok",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return nil
}

// createWorkloads creates every object in the YAML files of dir, in file name order.
func createWorkloads(ctx context.Context, restConfig *rest.Config, dir string) (int, error) {
	c, err := client.New(restConfig, client.Options{})
	if err != nil {
		return 0, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return 0, err
	}
	sort.Strings(files)
	count := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return count, err
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := decoder.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return count, fmt.Errorf("decoding %s: %w", file, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if obj.GetNamespace() == "" && obj.GetKind() != "Namespace" {
				obj.SetNamespace(metav1.NamespaceDefault)
			}
			if err := c.Create(ctx, obj); err != nil {
				return count, fmt.Errorf("creating %s %s from %s: %w", obj.GetKind(), obj.GetName(), file, err)
			}
			count++
		}
	}
	return count, nil
}

// printPlacement prints every pod with its node and phase, and per node its pods and the usage that
// metrics.k8s.io reports (read through the apiserver, as LoadAware reads it).
func printPlacement(ctx context.Context, clientset kubernetes.Interface, restConfig *rest.Config) error {
	pods, err := clientset.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		a, b := pods.Items[i], pods.Items[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	perNode := map[string]int{}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nNAMESPACE\tPOD\tSCHEDULER\tNODE\tPHASE\tNOTE")
	for _, p := range pods.Items {
		node, note := p.Spec.NodeName, ""
		if node == "" {
			node = "<pending>"
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					note = c.Message
				}
			}
		}
		perNode[node]++
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, p.Spec.SchedulerName, node, p.Status.Phase, note)
	}
	usage := map[string]string{}
	if mc, err := metricsclient.NewForConfig(restConfig); err == nil {
		if list, err := mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{}); err == nil {
			for _, m := range list.Items {
				usage[m.Name] = fmt.Sprintf("%s / %dGi", m.Usage.Cpu(), m.Usage.Memory().Value()>>30)
			}
		}
	}
	fmt.Fprintln(w, "\nNODE\tPODS\tUSAGE (cpu / memory, from metrics.k8s.io)")
	nodes := make([]string, 0, len(perNode))
	for n := range perNode {
		nodes = append(nodes, n)
	}
	for n := range usage {
		if _, ok := perNode[n]; !ok {
			nodes = append(nodes, n)
		}
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		fmt.Fprintf(w, "%s\t%d\t%s\n", n, perNode[n], usage[n])
	}
	return w.Flush()
}

// process is a child process whose output goes to a log file.
type process struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan error
}

func startProcess(path, logPath string, args ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Stop the child if the playground itself dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	p := &process{cmd: cmd, logPath: logPath, exited: make(chan error, 1)}
	go func() {
		p.exited <- cmd.Wait()
		logFile.Close()
	}()
	fmt.Printf("Started %s (pid %d, log %s)\n", filepath.Base(path), cmd.Process.Pid, logPath)
	return p, nil
}

// stop terminates the process and waits up to 10s before killing it.
func (p *process) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	fmt.Printf("Stopped %s\n", filepath.Base(p.cmd.Path))
}

// simulateUsage reports each fake node's usage every few seconds, as metrics-server would: a baseline
// (kwok-node-0 runs hot, at 85% CPU) plus 60% of the requests of the pods on the node.
func simulateUsage(ctx context.Context, clientset kubernetes.Interface, metrics *fakemetrics.Server) {
	const factor = 0.6
	for {
		nodes, err := clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		pods, err2 := clientset.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err == nil && err2 == nil {
			cpu := map[string]int64{}
			mem := map[string]int64{}
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				for _, c := range p.Spec.Containers {
					cpu[p.Spec.NodeName] += c.Resources.Requests.Cpu().MilliValue()
					mem[p.Spec.NodeName] += c.Resources.Requests.Memory().Value()
				}
			}
			for i, n := range nodes.Items {
				capCPU := n.Status.Allocatable.Cpu().MilliValue()
				capMem := n.Status.Allocatable.Memory().Value()
				base := 0.10 + 0.05*float64(i%3)
				if n.Name == "kwok-node-0" {
					base = 0.85
				}
				metrics.SetNode(n.Name, fakemetrics.NodeUsage{
					CPU:    fmt.Sprintf("%dm", int64(base*float64(capCPU))+int64(factor*float64(cpu[n.Name]))),
					Memory: fmt.Sprintf("%d", int64(base*float64(capMem))+int64(factor*float64(mem[n.Name]))),
					Window: 10 * time.Second,
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}
