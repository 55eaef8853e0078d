// Command playground runs custom-scheduler against a local control plane with simulated nodes, so it
// can be tried with no cluster: etcd and kube-apiserver (through envtest), kube-controller-manager
// (Jobs, Deployments, StatefulSets, garbage collection, ...), kwok to make nodes Ready and bound pods
// Running (and end them on request, see pod-exit-stages.yaml), and the custom-scheduler binary with the
// scheduler configuration from manifests/. It creates fake nodes and the sample workloads in
// examples/playground, prints where their pods landed and how to reach the cluster with kubectl, and
// stops everything it started on Ctrl-C.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	kwoknodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	kwokheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	kwokpodfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned"
	"github.com/custom-scheduler/custom-scheduler/test/fakemetrics"
)

const (
	kwokAnnotation = "kwok.x-k8s.io/node"
	schedulerName  = "custom-scheduler"
)

// podExitStages are our kwok Stages: the annotation custom-scheduler.io/playground-exit=fail|succeed
// ends a running pod as its containers exiting would.
//
//go:embed pod-exit-stages.yaml
var podExitStages string

// controllers are the kube-controller-manager controllers a local cluster needs: ServiceAccounts and
// their tokens, the workload controllers, garbage collection, namespace deletion, and the
// resourceclaim controller (it makes a pod's ResourceClaims from its ResourceClaimTemplates, --gpus).
// No node lifecycle controller (kwok keeps the nodes Ready) and no cloud provider.
var controllers = []string{
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"job-controller",
	"cronjob-controller",
	"ttl-after-finished-controller",
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"pod-garbage-collector-controller",
	"resourceclaim-controller",
}

// workloadAPIExamples are the in-tree gangs --workload-api applies.
const workloadAPIExamples = "examples/workload-api"

func main() {
	var (
		assets    = flag.String("assets", "", "folder with kube-apiserver, etcd, kube-controller-manager, kubectl and kwok (hack/envtest-assets.sh --all)")
		scheduler = flag.String("scheduler", "bin/custom-scheduler", "the custom-scheduler binary")
		config    = flag.String("config", "manifests/base/scheduler-config.yaml", "KubeSchedulerConfiguration to run (its clientConnection is pointed at the playground)")
		workloads = flag.String("workloads", "examples/playground", "folder of YAML objects to create once the scheduler runs")
		dir       = flag.String("dir", "_output/playground", "folder for the kubeconfig, configuration and logs")
		nodes     = flag.Int("nodes", 4, "how many fake nodes to create")
		exitAfter = flag.Duration("exit-after", 0, "stop by itself after this long (0: run until Ctrl-C)")
		workload  = flag.Bool("workload-api", false, "serve the in-tree workload API (scheduling.k8s.io/v1beta1 Workload and PodGroup, with the Job controller's WorkloadWithJob) and apply examples/workload-api")
		operator  = flag.String("operator", "", "also build and run this operator with its CRDs and apply its example from examples/operators ("+operatorNames()+")")
		gpus      = flag.Bool("gpus", false, "publish "+fmt.Sprint(gpusPerNode)+" GPUs per node in ResourceSlices (as a DRA driver "+gpuDriver+" would) and apply the DeviceClasses and GPU gangs of "+gpuExamples)
		example   = flag.String("example", "", "create this job of several roles (gang groups) from "+groupExamplesDir+" in namespace demo, in place of the sample workloads of --workloads ("+groupExampleNames()+")")
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
	opts := options{assets: *assets, schedulerBin: *scheduler, configPath: *config, workloadsDir: *workloads, dir: *dir,
		nodeCount: *nodes, operatorName: *operator, workloadAPI: *workload, gpus: *gpus, example: *example}
	if err := run(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "playground: %v\n", err)
		os.Exit(1)
	}
}

// options are the playground's flags.
type options struct {
	assets, schedulerBin, configPath, workloadsDir, dir string
	nodeCount                                           int
	operatorName                                        string
	workloadAPI, gpus                                   bool
	// example is a name of groupExamples (--example), created in place of workloadsDir's objects.
	example string
	// ready, when set, is closed once the playground printed where pods landed (tests).
	ready chan<- struct{}
}

func run(ctx context.Context, o options) error {
	assets, schedulerBin, configPath, workloadsDir, dir := o.assets, o.schedulerBin, o.configPath, o.workloadsDir, o.dir
	nodeCount, operatorName, workloadAPI := o.nodeCount, o.operatorName, o.workloadAPI
	if assets == "" {
		return errors.New("--assets is required (make run passes it)")
	}
	example, withExample := groupExamples[o.example]
	if o.example != "" && !withExample {
		return fmt.Errorf("unknown --example %q: use one of %s", o.example, groupExampleNames())
	}
	// An operator (--operator): built from its pin first (and those it needs), its CRDs installed with ours.
	var (
		op           operator
		opChain      []builtOperator
		opCRDs       []string
		withOperator = operatorName != ""
	)
	if withOperator {
		var err error
		if opChain, err = buildOperators(operatorName); err != nil {
			return err
		}
		op = opChain[len(opChain)-1].operator
		for _, b := range opChain {
			opCRDs = append(opCRDs, b.crds...)
		}
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
		CRDInstallOptions:     envtest.CRDInstallOptions{Paths: opCRDs},
		ErrorIfCRDPathMissing: false,
	}
	apiserver := env.ControlPlane.GetAPIServer()
	apiserver.Out, apiserver.Err = apiserverLog, apiserverLog
	// Our own service-account signing key, so the controller manager's token controller signs with the
	// key the apiserver verifies.
	saKey, err := writeServiceAccountKey(dir)
	if err != nil {
		return err
	}
	apiserver.Configure().Set("service-account-key-file", saKey).Set("service-account-signing-key-file", saKey)
	// No node lifecycle controller runs here to lift the not-ready taint that this admission plugin puts
	// on new nodes; kwok reports the nodes Ready instead.
	apiserver.Configure().Append("disable-admission-plugins", "TaintNodesByCondition")
	env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdLog, Err: etcdLog}
	cmControllers, cmGates := controllers, []string{}
	if workloadAPI {
		podgroup.SetInTreeRead(true) // for the placement table's group names
		// The in-tree workload API, as a cluster that turned it on serves it (the scheduler's own
		// GenericWorkload gate stays off: docs/coscheduling/intree-api.md).
		apiserver.Configure().Append("runtime-config", "scheduling.k8s.io/v1beta1=true").
			Append("feature-gates", "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,WorkloadWithJob=true")
		cmControllers = append(slices.Clone(controllers), "podgroup-protection-controller")
		cmGates = append(cmGates, "--feature-gates=GenericWorkload=true,WorkloadWithJob=true")
	}

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
	rootCA := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(rootCA, apiserver.SecureServing.CA, 0o600); err != nil {
		return err
	}
	clientset, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	pgClient, err := versioned.NewForConfig(restConfig)
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

	nodeNames := make([]string, 0, nodeCount)
	for i := 0; i < nodeCount; i++ {
		name := fmt.Sprintf("kwok-node-%d", i)
		if err := createNode(ctx, clientset, name, i); err != nil {
			return err
		}
		nodeNames = append(nodeNames, name)
	}
	fmt.Printf("Created %d fake nodes (8 CPU, 32Gi, 110 pods each).\n", nodeCount)
	if o.gpus {
		if err := checkDRAServed(clientset); err != nil {
			return err
		}
		if err := publishGPUs(ctx, clientset, nodeNames); err != nil {
			return err
		}
		fmt.Printf("Published %d GPUs per node in ResourceSlices, as the DRA driver %s would (kubectl get resourceslices).\n", gpusPerNode, gpuDriver)
	}

	// Simulated node usage behind metrics.k8s.io, as metrics-server would report it, for LoadAware.
	metrics, err := fakemetrics.Start(ctx, restConfig, metav1.NamespaceDefault, "playground-metrics-server")
	if err != nil {
		return fmt.Errorf("serving simulated node metrics: %w", err)
	}
	defer metrics.Close()
	go simulateUsage(ctx, clientset, metrics)
	fmt.Println("Serving simulated node usage through metrics.k8s.io (kwok-node-0 runs hot).")

	// The controllers run as an admin, with one identity (no per-controller ServiceAccounts).
	controllerManager, err := startProcess(filepath.Join(assets, "kube-controller-manager"), filepath.Join(logs, "kube-controller-manager.log"),
		append([]string{"--kubeconfig=" + kubeconfig,
			"--controllers=" + strings.Join(cmControllers, ","),
			"--leader-elect=false",
			"--service-account-private-key-file=" + saKey,
			"--root-ca-file=" + rootCA,
			"--secure-port=0"}, cmGates...)...)
	if err != nil {
		return err
	}
	defer controllerManager.stop()

	// The scheduler's leader-election lease lives in its own namespace, as in manifests/.
	if _, err := clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "custom-scheduler"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the custom-scheduler namespace: %w", err)
	}
	schedulerConfig := filepath.Join(dir, "scheduler-config.yaml")
	if withOperator && op.schedulerConfig != "" {
		fmt.Printf("Running custom-scheduler with %s (the alias profile: %s needs it).\n", op.schedulerConfig, operatorName)
		configPath = op.schedulerConfig
	}
	if err := writeSchedulerConfig(configPath, schedulerConfig, kubeconfig); err != nil {
		return err
	}
	scheduler, err := startProcess(schedulerBin, filepath.Join(logs, "custom-scheduler.log"),
		"--config="+schedulerConfig, "--secure-port=0", "--v=2")
	if err != nil {
		return err
	}
	defer scheduler.stop()

	if withExample {
		files := groupExampleFiles(o.example)
		objects, err := createWorkloadFiles(ctx, restConfig, files)
		if err != nil {
			return err
		}
		fmt.Printf("Created %d objects from %s (--example=%s, in place of %s).\n", objects, strings.Join(files, " and "), o.example, workloadsDir)
	} else {
		objects, err := createWorkloads(ctx, restConfig, workloadsDir)
		if err != nil {
			return err
		}
		fmt.Printf("Created %d objects from %s.\n", objects, workloadsDir)
	}
	if workloadAPI {
		objects, err := createWorkloads(ctx, restConfig, workloadAPIExamples)
		if err != nil {
			return err
		}
		fmt.Printf("Created %d objects from %s (in-tree PodGroups: kubectl -n demo get podgroups.scheduling.k8s.io).\n", objects, workloadAPIExamples)
	}
	if o.gpus {
		objects, err := createWorkloads(ctx, restConfig, gpuExamples)
		if err != nil {
			return err
		}
		if err := checkExtendedResourceServed(ctx, clientset); err != nil {
			return err
		}
		fmt.Printf("Created %d objects from %s (DeviceClasses %s and %s, GPU gangs in demo).\n", objects, gpuExamples, gpuDriver, gpuExtended)
	}

	// An operator that exits ends the playground; operatorExited says which.
	operatorExited := make(chan error, len(opChain))
	for _, b := range opChain {
		opProc, err := startOperator(ctx, b, kubeconfig, logs, clientset)
		if err != nil {
			return err
		}
		defer opProc.stop()
		go func() {
			err := <-opProc.exited
			opProc.exited <- err // for stop
			operatorExited <- fmt.Errorf("%s exited: %v; see %s", b.binary, err, opProc.logPath)
		}()
	}
	if withOperator {
		if err := applyOperatorExample(ctx, op, restConfig, clientset); err != nil {
			return err
		}
	}

	// Give the controllers and the scheduler a moment, then report where pods landed.
	placementTimeout, mustBind := time.Minute, []string(nil)
	if o.gpus {
		// The GPU gangs that fit are shown bound. Their members come last (gpu-train's wait for the
		// resourceclaim controller's claims) and LoadAware may turn them away at first: the simulated
		// usage counts the pods just bound at once, and LoadAware's estimates count them again until
		// warmupSeconds (30) pass, so right after the first burst every node looks hot for a while.
		placementTimeout, mustBind = 2*time.Minute, gpuGangs
	}
	var done func(context.Context) bool
	if withExample {
		// The job's composite whole. Its groups may be turned away at first, as the GPU gangs are
		// (LoadAware's warm-up), and back off podGroupBackoffSeconds before they try again.
		placementTimeout = 2 * time.Minute
		done = func(ctx context.Context) bool {
			whole, _, err := compositeWhole(ctx, clientset, pgClient, "demo", example.root)
			return err == nil && whole
		}
	}
	waitForPlacement(ctx, clientset, placementTimeout, mustBind, done)
	select {
	case err := <-scheduler.exited:
		return fmt.Errorf("custom-scheduler exited: %v; see %s", err, scheduler.logPath)
	case err := <-controllerManager.exited:
		return fmt.Errorf("kube-controller-manager exited: %v; see %s", err, controllerManager.logPath)
	case err := <-operatorExited:
		return err
	default:
	}
	if err := printPlacement(ctx, clientset, restConfig); err != nil {
		return err
	}
	if withExample {
		whole, numbers, err := compositeWhole(ctx, clientset, pgClient, "demo", example.root)
		if err != nil {
			return err
		}
		state := "whole"
		if !whole {
			state = "NOT whole"
		}
		fmt.Printf("\n--example=%s: %s.\nThe job %s is %s (%s).\n", o.example, example.expect, example.root, state, numbers)
		if example.made {
			if err := printMadeGroups(ctx, os.Stdout, pgClient, "demo"); err != nil {
				return err
			}
		} else {
			fmt.Printf("kubectl gang get %s -n demo:\n", example.root)
			if err := printGangTree(ctx, os.Stdout, clientset, pgClient, "demo", example.root); err != nil {
				return fmt.Errorf("kubectl gang get %s: %w", example.root, err)
			}
		}
	}
	kubectl := filepath.Join(assets, "kubectl") + " --kubeconfig " + kubeconfig
	fmt.Printf(`
The playground is running.
  kubectl:   %[1]s get pods -A -o wide
  scheduler: tail -f %[2]s
`, kubectl, scheduler.logPath)
	if !withExample { // the sample workloads'
		fmt.Printf(`Try (README.md, "Try this"):
  %[1]s -n demo annotate pod -l job-name=training,batch.kubernetes.io/job-completion-index=1 --overwrite custom-scheduler.io/playground-exit=fail
  %[1]s -n demo get pods -l job-name=training -o wide -w
  %[1]s -n demo scale deployment web --replicas=12
`, kubectl)
	}
	fmt.Println("Press Ctrl-C to stop everything.")
	if withOperator {
		for _, b := range opChain[:len(opChain)-1] {
			fmt.Printf("%s runs (log %s).\n", b.binary, filepath.Join(logs, b.binary+".log"))
		}
		fmt.Printf("%s runs (log %s); its example is demo/%s:\n  %s -n demo get pg %s\n  %s -n demo get pods -l %s=%s -o wide\n",
			op.binary, filepath.Join(logs, op.binary+".log"), op.group, kubectl, op.group, kubectl, podGroupLabel, op.group)
		for _, k := range op.kubectl {
			fmt.Printf("  %s -n demo %s\n", kubectl, k)
		}
	}
	if o.gpus {
		fmt.Printf(`GPUs (%[2]s):
  %[1]s get resourceslices
  %[1]s -n demo get resourceclaims
  %[1]s -n demo get pg gpu-train gpu-finetune gpu-too-big
  %[1]s -n demo get pg gpu-too-big -o jsonpath='{.status.shortfall}'
`, kubectl, gpuExamples)
	}
	if withExample {
		fmt.Printf("The job of %s (%s):\n", filepath.Join(groupExamplesDir, example.file), filepath.Join(groupExamplesDir, "README.md"))
		if !example.made {
			gang := filepath.Join(filepath.Dir(schedulerBin), "kubectl-gang") + " --kubeconfig " + kubeconfig
			fmt.Printf("  %s get %s -n demo\n  %s explain %s -n demo\n", gang, example.root, gang, example.root)
		}
		for _, k := range example.kubectl {
			fmt.Printf("  %s -n demo %s\n", kubectl, k)
		}
	}
	if o.ready != nil {
		close(o.ready)
	}

	select {
	case <-ctx.Done():
		fmt.Println("\nShutting down...")
		return nil
	case err := <-scheduler.exited:
		return fmt.Errorf("custom-scheduler exited: %v; see %s", err, scheduler.logPath)
	case err := <-controllerManager.exited:
		return fmt.Errorf("kube-controller-manager exited: %v; see %s", err, controllerManager.logPath)
	case err := <-kwok.exited:
		return fmt.Errorf("kwok exited: %v; see %s", err, kwok.logPath)
	case err := <-operatorExited:
		return err
	}
}

// writeServiceAccountKey writes a new RSA key for signing and verifying service-account tokens into dir
// and returns its path.
func writeServiceAccountKey(dir string) (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", fmt.Errorf("generating the service-account key: %w", err)
	}
	path := filepath.Join(dir, "service-account.key")
	data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing the service-account key: %w", err)
	}
	return path, nil
}

// kwokConfiguration is kwok's configuration followed by the stages that make managed nodes Ready
// (and keep them so), pods bound to them Running and deleted pods gone, as shipped in the kwok module,
// and ours that end a pod on request. kwok's pod-complete stage (a Job's pods succeed at once) is left
// out: here pods run until annotated, as a real workload runs until it exits.
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
	docs := []string{options, kwoknodefast.DefaultNodeInit, kwokheartbeat.DefaultNodeHeartbeat, kwokpodfast.DefaultPodReady, kwokpodfast.DefaultPodDelete, podExitStages}
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

// nodeCPU is each fake node's CPU (the examples are sized for it).
const nodeCPU = "8"

func createNode(ctx context.Context, clientset kubernetes.Interface, name string, i int) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(nodeCPU),
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
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return 0, err
	}
	sort.Strings(files)
	return createWorkloadFiles(ctx, restConfig, files)
}

// createWorkloadFiles creates every object in files, in order.
func createWorkloadFiles(ctx context.Context, restConfig *rest.Config, files []string) (int, error) {
	c, err := client.New(restConfig, client.Options{})
	if err != nil {
		return 0, err
	}
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

// waitForPlacement waits (at most timeout) until the controllers made their pods and the scheduler
// decided on each of ours: every Deployment has its replicas, every Job its active pods, and every
// custom-scheduler pod is bound or reported unschedulable; the pods of the PodGroups in mustBind
// bound; and done, if set, true.
func waitForPlacement(ctx context.Context, clientset kubernetes.Interface, timeout time.Duration, mustBind []string, done func(context.Context) bool) {
	_ = wait.PollUntilContextTimeout(ctx, time.Second, timeout, false, func(ctx context.Context) (bool, error) {
		deployments, err := clientset.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, d := range deployments.Items {
			if d.Status.ObservedGeneration < d.Generation || d.Status.Replicas < ptr.Deref(d.Spec.Replicas, 1) {
				return false, nil
			}
		}
		jobs, err := clientset.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, j := range jobs.Items {
			if j.Status.CompletionTime == nil && j.Status.Active < ptr.Deref(j.Spec.Parallelism, 1) {
				return false, nil
			}
		}
		pods, err := clientset.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Spec.SchedulerName == schedulerName && p.Spec.NodeName == "" && unschedulableMessage(&p) == "" {
				return false, nil
			}
			if group, ok := podgroup.Of(&p); ok && p.Spec.NodeName == "" && slices.Contains(mustBind, group) {
				return false, nil
			}
		}
		return done == nil || done(ctx), nil
	})
}

// printPlacement prints every pod grouped by the workload that owns it, with its node and phase (a
// pending pod with the reason), and per node its pods and the usage that metrics.k8s.io reports (read
// through the apiserver, as LoadAware reads it).
func printPlacement(ctx context.Context, clientset kubernetes.Interface, restConfig *rest.Config) error {
	pods, err := clientset.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	replicaSets, err := clientset.AppsV1().ReplicaSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing ReplicaSets: %w", err)
	}
	// A ReplicaSet's pods belong to its Deployment, if it has one.
	rsOwner := map[string]string{}
	for _, rs := range replicaSets.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil {
			rsOwner[rs.Namespace+"/"+rs.Name] = ref.Kind + " " + rs.Namespace + "/" + ref.Name
		}
	}
	owner := func(p *corev1.Pod) string {
		o := "Pod " + p.Namespace + "/" + p.Name
		if ref := metav1.GetControllerOf(p); ref != nil {
			o = ref.Kind + " " + p.Namespace + "/" + ref.Name
			if ref.Kind == "ReplicaSet" && rsOwner[p.Namespace+"/"+ref.Name] != "" {
				o = rsOwner[p.Namespace+"/"+ref.Name]
			}
		}
		if group, ok := podgroup.Of(p); ok {
			o += " (PodGroup " + group + ")"
		}
		return o
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		a, b := &pods.Items[i], &pods.Items[j]
		if oa, ob := owner(a), owner(b); oa != ob {
			return oa < ob
		}
		return a.Name < b.Name
	})
	devices := podDevices(ctx, clientset)
	perNode := map[string]int{}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nOWNER\tPOD\tSCHEDULER\tNODE\tPHASE\tNOTE")
	last := ""
	for i := range pods.Items {
		p := &pods.Items[i]
		node, note := p.Spec.NodeName, ""
		switch {
		case node == "" && p.Spec.SchedulerName != schedulerName:
			note = fmt.Sprintf("for scheduler %q, which the playground does not run (only %s): stays pending", p.Spec.SchedulerName, schedulerName)
		case node == "":
			note = unschedulableMessage(p)
		default:
			note = deviceNote(devices[p.Namespace+"/"+p.Name])
		}
		if node == "" {
			node = "<pending>"
		}
		perNode[node]++
		o := owner(p)
		if o == last {
			o = ""
		} else {
			last = o
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", o, p.Name, p.Spec.SchedulerName, node, p.Status.Phase, note)
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

// unschedulableMessage is the scheduler's reason for not placing the pod, if it gave one.
func unschedulableMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

// process is a child process whose output goes to a log file.
type process struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan error
}

func startProcess(path, logPath string, args ...string) (*process, error) {
	return startProcessEnv(path, logPath, nil, args...)
}

// startProcessEnv is startProcess with env added to the playground's environment.
func startProcessEnv(path, logPath string, env []string, args ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
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

// baseUsage is the share of its capacity that the i-th node (by name) uses with no pod: 10-20%, and
// 85% of kwok-node-0, which runs hot.
func baseUsage(i int, name string) float64 {
	if name == "kwok-node-0" {
		return 0.85
	}
	return 0.10 + 0.05*float64(i%3)
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
				base := baseUsage(i, n.Name)
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
