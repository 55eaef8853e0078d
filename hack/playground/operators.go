package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// operator is one of the operators run in the playground with --operator=NAME: built from its pin in
// test/interop/tools/<tool>/go.mod (as `make interop-operators` does), its CRDs installed from the Go
// module cache, and the example of examples/operators applied. Most create scheduler-plugins PodGroups;
// JobSet and Kueue are run beside our own.
type operator struct {
	tool    string   // folder under test/interop/tools
	module  string   // the module whose CRDs (and webhook manifests) are read
	pkg     string   // the main package
	binary  string   // under bin/interop
	crds    []string // CRD files inside the module (glob patterns)
	example string   // under examples/operators; more files in moreExamples, created first
	// moreExamples are created before example (e.g. Kueue's queues before its Job); every document of a
	// file is created, namespaced objects in namespace demo.
	moreExamples []string
	group        string // the PodGroup (and job) the example makes
	// needs are operators started before this one, without their examples (Trainer makes JobSets).
	needs []string
	// retryCreate: creating an example object is retried (30 s) while the error says this (a webhook that
	// reads from its informer's cache and does not see an object just created).
	retryCreate string
	// kubectl are more commands to show (after "kubectl -n demo").
	kubectl []string
	// schedulerConfig, when set, replaces the scheduler's configuration (--config): for KubeRay v1.5.0,
	// the shipped one with the alias profile scheduler-plugins-scheduler.
	schedulerConfig string
	// args are its flags; env its environment.
	args func(kubeconfig string) []string
	env  func(kubeconfig string) []string
	// prepare runs before it starts; ready after, until it is ready to reconcile. moduleDir is the
	// module's folder in the module cache.
	prepare func(ctx context.Context, c kubernetes.Interface, moduleDir string) error
	ready   func(ctx context.Context, c kubernetes.Interface, p *process, moduleDir string) error
}

// builtOperator is an operator built: its binary, its module's folder and its CRD files.
type builtOperator struct {
	operator
	bin, moduleDir string
	crds           []string
}

var operators = map[string]operator{
	// JobSet with our PodGroup beside it (examples/operators/jobset-jobset.yaml): JobSet knows nothing of
	// the gang.
	"jobset": jobSetOperator,
	// Kubeflow Trainer v2 (and JobSet, which it runs its TrainJobs on): a ClusterTrainingRuntime with
	// coscheduling and a TrainJob of 4 nodes, whose PodGroup Trainer writes.
	"trainer": trainerOperator,
	"kuberay": {
		tool: "kuberay", module: "github.com/ray-project/kuberay/ray-operator", pkg: "github.com/ray-project/kuberay/ray-operator",
		binary: "ray-operator", example: "kuberay-raycluster.yaml", group: "ray-gang",
		crds: []string{"config/crd/bases/ray.io_rayclusters.yaml", "config/crd/bases/ray.io_rayjobs.yaml", "config/crd/bases/ray.io_rayservices.yaml"},
		args: func(kubeconfig string) []string {
			return []string{"--kubeconfig=" + kubeconfig, "--enable-leader-election=false", "--batch-scheduler=scheduler-plugins",
				"--metrics-addr=127.0.0.1:" + freePort(), "--health-probe-bind-address=127.0.0.1:" + freePort()}
		},
	},
	// KubeRay v1.5.0 overwrites every pod's schedulerName with scheduler-plugins-scheduler: the scheduler
	// runs with the alias profile (the kustomize component's configuration).
	"kuberay-v1.5": {
		tool: "kuberay-v1.5", module: "github.com/ray-project/kuberay/ray-operator", pkg: "github.com/ray-project/kuberay/ray-operator",
		binary: "ray-operator-v1.5", example: "kuberay-raycluster.yaml", group: "ray-gang",
		crds:            []string{"config/crd/bases/ray.io_rayclusters.yaml", "config/crd/bases/ray.io_rayjobs.yaml", "config/crd/bases/ray.io_rayservices.yaml"},
		schedulerConfig: "manifests/components/scheduler-plugins-alias/scheduler-config.yaml",
		args: func(kubeconfig string) []string {
			return []string{"--kubeconfig=" + kubeconfig, "--enable-leader-election=false", "--batch-scheduler=scheduler-plugins",
				"--metrics-addr=127.0.0.1:" + freePort(), "--health-probe-bind-address=127.0.0.1:" + freePort()}
		},
	},
	// Kueue admits the example Job (suspended, in LocalQueue team) by quota; custom-scheduler places its
	// pods as a gang. Run as test/interop runs it (docs/operators.md, Kueue).
	"kueue": {
		tool: "kueue", module: "sigs.k8s.io/kueue", pkg: "sigs.k8s.io/kueue/cmd/kueue",
		binary: "kueue", moreExamples: []string{"kueue-queues.yaml"}, example: "kueue-job.yaml", group: "kueue-gang",
		crds: kueueCRDs,
		args: func(string) []string {
			return []string{"--config=" + filepath.Join(kueueDir, "config.yaml"), "--feature-gates=VisibilityOnDemand=false"}
		},
		env:     func(kubeconfig string) []string { return []string{"KUBECONFIG=" + kubeconfig} },
		prepare: prepareKueue,
		ready:   kueueReady,
	},
	"training-operator": {
		tool: "training-operator", module: "github.com/kubeflow/training-operator", pkg: "github.com/kubeflow/training-operator/cmd/training-operator.v1",
		binary: "training-operator", example: "training-operator-pytorchjob.yaml", group: "pytorch-gang",
		crds: []string{"manifests/base/crds/kubeflow.org_pytorchjobs.yaml"},
		args: func(string) []string {
			return []string{"--gang-scheduler-name=" + schedulerName, "--enable-scheme=pytorchjob",
				"--metrics-bind-address=127.0.0.1:" + freePort(), "--health-probe-bind-address=127.0.0.1:" + freePort(), "--webhook-server-port=" + freePort()}
		},
		env: func(kubeconfig string) []string {
			return []string{"KUBECONFIG=" + kubeconfig, "MY_POD_NAMESPACE=" + trainingNamespace}
		},
		prepare: prepareTrainingOperator,
		ready:   trainingOperatorReady,
	},
	"mpi-operator": {
		tool: "mpi-operator", module: "github.com/kubeflow/mpi-operator", pkg: "github.com/kubeflow/mpi-operator/cmd/mpi-operator",
		binary: "mpi-operator", example: "mpi-operator-mpijob.yaml", group: "mpi-gang",
		crds: []string{"manifests/base/kubeflow.org_mpijobs.yaml"},
		// It always leader-elects, in --lock-namespace, and serves its health check on port 8080.
		args: func(kubeconfig string) []string {
			return []string{"--kubeConfig=" + kubeconfig, "--gang-scheduling=" + schedulerName, "--lock-namespace=" + metav1.NamespaceDefault}
		},
	},
}

func operatorNames() string {
	var names []string
	for n := range operators {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// buildOperators builds the operator named and those it needs (first) from their pins.
func buildOperators(name string) ([]builtOperator, error) {
	op, ok := operators[name]
	if !ok {
		return nil, fmt.Errorf("--operator=%s: not one of %s", name, operatorNames())
	}
	var built []builtOperator
	for _, n := range op.needs {
		b, err := buildOperators(n)
		if err != nil {
			return nil, err
		}
		built = append(built, b...)
	}
	b, err := buildOperator(op)
	if err != nil {
		return nil, err
	}
	return append(built, b), nil
}

// buildOperator builds the operator's binary from its pin and finds its module and CRD files.
func buildOperator(op operator) (builtOperator, error) {
	toolDir := filepath.Join("test", "interop", "tools", op.tool)
	bin, err := filepath.Abs(filepath.Join("bin", "interop", op.binary))
	if err != nil {
		return builtOperator{}, err
	}
	fmt.Printf("Building %s from %s/go.mod (the first build takes a few minutes)...\n", op.binary, toolDir)
	build := exec.Command("go", "build", "-o", bin, op.pkg)
	build.Dir = toolDir
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return builtOperator{}, fmt.Errorf("building %s: %w", op.binary, err)
	}
	download := exec.Command("go", "mod", "download", "-json", op.module)
	download.Dir = toolDir
	out, err := download.Output()
	if err != nil {
		return builtOperator{}, fmt.Errorf("go mod download %s: %w", op.module, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return builtOperator{}, fmt.Errorf("go mod download %s: no Dir in %s", op.module, out)
	}
	b := builtOperator{operator: op, bin: bin, moduleDir: m.Dir}
	for _, pattern := range op.crds {
		files, err := filepath.Glob(filepath.Join(m.Dir, pattern))
		if err != nil || len(files) == 0 {
			return builtOperator{}, fmt.Errorf("no CRD %s in %s (%v)", pattern, m.Dir, err)
		}
		b.crds = append(b.crds, files...)
	}
	return b, nil
}

// startOperator prepares and starts the operator and waits until it is ready.
func startOperator(ctx context.Context, op builtOperator, kubeconfig, logs string, c kubernetes.Interface) (*process, error) {
	if op.prepare != nil {
		if err := op.prepare(ctx, c, op.moduleDir); err != nil {
			return nil, err
		}
	}
	var env []string
	if op.env != nil {
		env = op.env(kubeconfig)
	}
	p, err := startProcessEnv(op.bin, filepath.Join(logs, op.binary+".log"), env, op.args(kubeconfig)...)
	if err != nil {
		return nil, err
	}
	if op.ready != nil {
		if err := op.ready(ctx, c, p, op.moduleDir); err != nil {
			p.stop()
			return nil, err
		}
	}
	return p, nil
}

// applyOperatorExample creates the operator's example in namespace demo, waits (at most 90 s) for the
// operator to make the PodGroup and its pods and for the scheduler to place them, so the placement below
// shows them (a first attempt may back off behind the sample workloads' LoadAware estimates), and prints
// the PodGroup's state.
func applyOperatorExample(ctx context.Context, op operator, restConfig *rest.Config, c kubernetes.Interface) error {
	cl, err := client.New(restConfig, client.Options{})
	if err != nil {
		return err
	}
	for _, name := range append(append([]string{}, op.moreExamples...), op.example) {
		if err := createExample(ctx, cl, name, op.retryCreate); err != nil {
			return err
		}
	}
	fmt.Printf("Waiting for the operator's pods and their placement...\n")
	var (
		pg    *unstructured.Unstructured
		bound int
		pods  int
	)
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: podGroupLabel + "=" + op.group})
		if err != nil {
			return false, nil
		}
		g := &unstructured.Unstructured{}
		g.SetAPIVersion("scheduling.x-k8s.io/v1alpha1")
		g.SetKind("PodGroup")
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "demo", Name: op.group}, g); err != nil {
			return false, nil
		}
		pg, pods, bound = g, 0, 0
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			pods++
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		minMember, _, _ := unstructured.NestedInt64(g.Object, "spec", "minMember")
		return int64(pods) >= minMember && bound == pods, nil
	})
	if pg == nil {
		fmt.Printf("PodGroup demo/%s: not there yet.\n", op.group)
		return nil
	}
	fmt.Printf("PodGroup demo/%s: %s; %d of its %d pods bound.\n", op.group, podGroupState(pg), bound, pods)
	return nil
}

// podGroupState is a scheduler-plugins PodGroup's minMember, status.scheduled and Scheduled condition.
func podGroupState(pg *unstructured.Unstructured) string {
	minMember, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
	scheduled, _, _ := unstructured.NestedInt64(pg.Object, "status", "scheduled")
	state := fmt.Sprintf("minMember %d, status.scheduled %d", minMember, scheduled)
	conds, _, _ := unstructured.NestedSlice(pg.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Scheduled" {
			state += fmt.Sprintf(", Scheduled %v (%v: %v)", m["status"], m["reason"], m["message"])
		}
	}
	return state
}

const (
	podGroupLabel = "scheduling.x-k8s.io/pod-group"
	// The Training Operator's cert rotator: its Secret, the webhook configuration it injects its CA into,
	// and the fixed folder its webhook server reads the certificate from (a kubelet would mount the Secret).
	trainingNamespace = "kubeflow"
	trainingSecret    = "training-operator-webhook-cert"
	trainingWebhook   = "validator.training-operator.kubeflow.org"
	trainingCertDir   = "/tmp/k8s-webhook-server/serving-certs"
)

// createExample creates every object of examples/operators/NAME, namespaced ones in namespace demo,
// retrying (30 s) while the error says retryOn (when set).
func createExample(ctx context.Context, cl client.Client, name, retryOn string) error {
	data, err := os.ReadFile(filepath.Join("examples", "operators", name))
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if namespaced, err := cl.IsObjectNamespaced(obj); err != nil {
			return err
		} else if namespaced {
			obj.SetNamespace("demo")
		}
		var err error
		_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			err = cl.Create(ctx, obj.DeepCopy())
			return err == nil || retryOn == "" || !strings.Contains(err.Error(), retryOn), nil
		})
		if err != nil {
			return fmt.Errorf("creating %s %s from examples/operators/%s: %w", obj.GetKind(), obj.GetName(), name, err)
		}
		fmt.Printf("Created %s %s from examples/operators/%s.\n", obj.GetKind(), obj.GetName(), name)
	}
	return nil
}

func prepareTrainingOperator(ctx context.Context, c kubernetes.Interface, _ string) error {
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trainingNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := c.CoreV1().Secrets(trainingNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: trainingSecret}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: trainingWebhook}}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return os.RemoveAll(trainingCertDir)
}

// trainingOperatorReady copies the certificate its rotator wrote into the Secret to the folder its
// webhook server reads, then waits for its controllers to start.
func trainingOperatorReady(ctx context.Context, c kubernetes.Interface, p *process, _ string) error {
	// An operator that exits stops the wait at once rather than at its timeout.
	running := func() error {
		select {
		case err := <-p.exited:
			return fmt.Errorf("the Training Operator exited (%v); see %s", err, p.logPath)
		default:
			return nil
		}
	}
	var secret *corev1.Secret
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := running(); err != nil {
			return false, err
		}
		var err error
		secret, err = c.CoreV1().Secrets(trainingNamespace).Get(ctx, trainingSecret, metav1.GetOptions{})
		return err == nil && len(secret.Data["tls.crt"]) > 0, nil
	}); err != nil {
		return fmt.Errorf("the Training Operator's cert rotator did not fill its Secret: %w; see %s", err, p.logPath)
	}
	if err := os.MkdirAll(trainingCertDir, 0o700); err != nil {
		return err
	}
	for _, k := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(trainingCertDir, k), secret.Data[k], 0o600); err != nil {
			return err
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		if err := running(); err != nil {
			return false, err
		}
		b, _ := os.ReadFile(p.logPath)
		for _, line := range bytes.Split(b, []byte("\n")) {
			if bytes.Contains(line, []byte("Starting workers")) && bytes.Contains(line, []byte("pytorchjob-controller")) {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return fmt.Errorf("the Training Operator's controllers did not start: %w; see %s", err, p.logPath)
	}
	return nil
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "0"
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}
