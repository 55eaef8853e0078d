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

// operator is one of the operators that create scheduler-plugins PodGroups, run in the playground with
// --operator=NAME: built from its pin in test/interop/tools/<tool>/go.mod (as `make interop` does), its
// CRDs installed from the Go module cache, and the example of examples/operators applied.
type operator struct {
	tool    string   // folder under test/interop/tools
	module  string   // the module whose CRDs are installed
	pkg     string   // the main package
	binary  string   // under bin/interop
	crds    []string // CRD files inside the module
	example string   // under examples/operators; more files in moreExamples, created first
	// moreExamples are created before example (e.g. Kueue's queues before its Job); every document of a
	// file is created, namespaced objects in namespace demo.
	moreExamples []string
	group        string // the PodGroup (and job) the example makes
	// schedulerConfig, when set, replaces the scheduler's configuration (--config): for KubeRay v1.5.0,
	// the shipped one with the alias profile scheduler-plugins-scheduler.
	schedulerConfig string
	// args are its flags; env its environment.
	args func(kubeconfig string) []string
	env  func(kubeconfig string) []string
	// prepare runs before it starts; ready after, until it is ready to reconcile.
	prepare func(ctx context.Context, c kubernetes.Interface) error
	ready   func(ctx context.Context, c kubernetes.Interface, p *process) error
}

var operators = map[string]operator{
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

// buildOperator builds the operator's binary from its pin and returns its path and the CRD files.
func buildOperator(op operator) (string, []string, error) {
	toolDir := filepath.Join("test", "interop", "tools", op.tool)
	bin, err := filepath.Abs(filepath.Join("bin", "interop", op.binary))
	if err != nil {
		return "", nil, err
	}
	fmt.Printf("Building %s from %s/go.mod (the first build takes a few minutes)...\n", op.binary, toolDir)
	build := exec.Command("go", "build", "-o", bin, op.pkg)
	build.Dir = toolDir
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return "", nil, fmt.Errorf("building %s: %w", op.binary, err)
	}
	download := exec.Command("go", "mod", "download", "-json", op.module)
	download.Dir = toolDir
	out, err := download.Output()
	if err != nil {
		return "", nil, fmt.Errorf("go mod download %s: %w", op.module, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", nil, fmt.Errorf("go mod download %s: no Dir in %s", op.module, out)
	}
	var crds []string
	for _, f := range op.crds {
		crds = append(crds, filepath.Join(m.Dir, f))
	}
	return bin, crds, nil
}

// startOperator starts the operator and applies its example in namespace demo.
func startOperator(ctx context.Context, op operator, bin, kubeconfig, logs string, restConfig *rest.Config, c kubernetes.Interface) (*process, error) {
	if op.prepare != nil {
		if err := op.prepare(ctx, c); err != nil {
			return nil, err
		}
	}
	var env []string
	if op.env != nil {
		env = op.env(kubeconfig)
	}
	p, err := startProcessEnv(bin, filepath.Join(logs, op.binary+".log"), env, op.args(kubeconfig)...)
	if err != nil {
		return nil, err
	}
	if op.ready != nil {
		if err := op.ready(ctx, c, p); err != nil {
			p.stop()
			return nil, err
		}
	}
	cl, err := client.New(restConfig, client.Options{})
	if err != nil {
		p.stop()
		return nil, err
	}
	for _, name := range append(append([]string{}, op.moreExamples...), op.example) {
		if err := createExample(ctx, cl, name); err != nil {
			p.stop()
			return nil, err
		}
	}
	// Wait (at most 90 s) for the operator to make the PodGroup and its pods and for the scheduler to
	// place them, so the placement below shows them (a first attempt may back off behind the sample
	// workloads' LoadAware estimates).
	fmt.Printf("Waiting for the operator's pods and their placement...\n")
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := c.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: podGroupLabel + "=" + op.group})
		if err != nil {
			return false, nil
		}
		pg := &unstructured.Unstructured{}
		pg.SetAPIVersion("scheduling.x-k8s.io/v1alpha1")
		pg.SetKind("PodGroup")
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "demo", Name: op.group}, pg); err != nil {
			return false, nil
		}
		minMember, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return int64(len(pods.Items)) >= minMember && bound == len(pods.Items), nil
	})
	return p, nil
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

// createExample creates every object of examples/operators/NAME, namespaced ones in namespace demo.
func createExample(ctx context.Context, cl client.Client, name string) error {
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
		if err := cl.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s %s from examples/operators/%s: %w", obj.GetKind(), obj.GetName(), name, err)
		}
		fmt.Printf("Created %s %s from examples/operators/%s.\n", obj.GetKind(), obj.GetName(), name)
	}
	return nil
}

func prepareTrainingOperator(ctx context.Context, c kubernetes.Interface) error {
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
func trainingOperatorReady(ctx context.Context, c kubernetes.Interface, p *process) error {
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
