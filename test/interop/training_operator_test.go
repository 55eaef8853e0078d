package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var pytorchJobGVR = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

const (
	// The Training Operator's cert rotator: the Secret it fills, the webhook configuration it injects
	// the CA into, and the fixed folder its webhook server reads the serving certificate from (a
	// kubelet would mount the Secret there; the test copies it).
	trainingNamespace    = "kubeflow"
	trainingSecret       = "training-operator-webhook-cert"
	trainingWebhook      = "validator.training-operator.kubeflow.org"
	trainingCertDir      = "/tmp/k8s-webhook-server/serving-certs"
	trainingStartTimeout = 4 * time.Minute
)

// startTrainingOperator applies the PyTorchJob CRD from the module cache, prepares what its cert
// rotator needs and runs training-operator with gang scheduling by custom-scheduler; it returns once
// the PyTorchJob controller has started.
func startTrainingOperator(t *testing.T) *process {
	t.Helper()
	ctx := context.Background()
	bin := operatorBinary(t, "training-operator")
	dir := moduleDir(t, "training-operator", "github.com/kubeflow/training-operator")
	deleteCRDsAtEnd(t, applyFile(t, filepath.Join(dir, "manifests", "base", "crds", "kubeflow.org_pytorchjobs.yaml")))

	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trainingNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// An empty Secret (the rotator fills it) and a webhook configuration with no webhooks (the rotator
	// injects its CA; the tests need no admission webhook).
	_ = client.CoreV1().Secrets(trainingNamespace).Delete(ctx, trainingSecret, metav1.DeleteOptions{})
	if _, err := client.CoreV1().Secrets(trainingNamespace).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: trainingSecret}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: trainingWebhook}}
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := os.RemoveAll(trainingCertDir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(trainingCertDir) })

	p := startOperator(t, "training-operator", bin,
		[]string{"KUBECONFIG=" + kubeconfig, "MY_POD_NAMESPACE=" + trainingNamespace},
		"--gang-scheduler-name="+schedulerName, "--enable-scheme=pytorchjob",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", mustFreePort(t)),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", mustFreePort(t)),
		fmt.Sprintf("--webhook-server-port=%d", mustFreePort(t)))

	// Once the rotator has filled the Secret, put its certificate where the webhook server reads it;
	// the rotator checks for the file with back-off (1 s, doubling) and then starts the controllers.
	var secret *v1.Secret
	waitFor(t, "the Training Operator's cert rotator to fill its Secret", 60*time.Second, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("training-operator exited:\n%s", tail(p.logText(), 20))
		}
		var err error
		secret, err = client.CoreV1().Secrets(trainingNamespace).Get(ctx, trainingSecret, metav1.GetOptions{})
		return err == nil && len(secret.Data["tls.crt"]) > 0 && len(secret.Data["tls.key"]) > 0, err
	})
	if err := os.MkdirAll(trainingCertDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(trainingCertDir, k), secret.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	waitFor(t, "the Training Operator's PyTorchJob controller to start", trainingStartTimeout, func(context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("training-operator exited:\n%s", tail(p.logText(), 20))
		}
		for _, line := range strings.Split(p.logText(), "\n") {
			if strings.Contains(line, "Starting workers") && strings.Contains(line, "pytorchjob-controller") {
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("the Training Operator's controllers started %v after the certificate was written", time.Since(start).Round(time.Second))
	return p
}

// TestTrainingOperator runs Kubeflow's Training Operator v1.8.1 with
// --gang-scheduler-name=custom-scheduler against custom-scheduler:
//   - a PyTorchJob (Master 1, Worker 2, minAvailable 3, scheduleTimeoutSeconds 30) gets a PodGroup
//     with minMember 3, minResources cpu 3 and timeout 30, and is bound whole;
//   - a deleted worker is recreated by the operator and the gang is whole again;
//   - a worker that fails (phase Failed, exit code 1, restartPolicy OnFailure) is deleted and recreated
//     by the operator (PyTorchJobRestarting) and the gang is whole again;
//   - a PyTorchJob too big for the cluster (each pod fits a node, the whole does not) holds nothing and
//     its pods say why;
//   - the operator-written timeout is the one the plugin waits: a job whose master cannot be placed
//     (a malformed topology annotation, refused until fixed) has its workers wait for the quorum for
//     scheduleTimeoutSeconds (10), then rejected (GangTimedOut "within 10s"), none left bound;
//   - deleting a PyTorchJob deletes its pods and its PodGroup.
func TestTrainingOperator(t *testing.T) {
	ns := testNamespace(t, "training")
	startTrainingOperator(t)
	ctx := context.Background()

	// A gang bound whole, with the PodGroup the operator derived from runPolicy.schedulingPolicy.
	createObject(t, pytorchJobGVR, ns, readExample(t, "training-operator-pytorchjob.yaml"))
	pg := waitPodGroup(t, ns, "pytorch-gang")
	spec := specOf(t, pg)
	if spec.MinMember != 3 || !quantityEqual(spec.MinResources["cpu"], "3") || spec.ScheduleTimeoutSeconds == nil || *spec.ScheduleTimeoutSeconds != 30 {
		t.Errorf("the Training Operator's PodGroup spec = %+v, want minMember 3, minResources cpu 3, scheduleTimeoutSeconds 30", spec)
	}
	for _, p := range waitGangBound(t, ns, "pytorch-gang", 3) {
		if p.Spec.SchedulerName != schedulerName {
			t.Errorf("pod %s has schedulerName %q, want %q", p.Name, p.Spec.SchedulerName, schedulerName)
		}
	}

	// A deleted worker is recreated, and the replacement completes the gang again.
	replaced := "pytorch-gang-worker-1"
	old, err := client.CoreV1().Pods(ns).Get(ctx, replaced, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deletePod(t, ns, replaced)
	waitFor(t, "the operator to recreate "+replaced+" and the gang to be whole again", 120*time.Second, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, replaced, metav1.GetOptions{})
		if err != nil || p.UID == old.UID {
			return false, ignoreNotFound(err)
		}
		n, err := liveBound(ctx, ns, "pytorch-gang")
		return liveAndBound(p) && n == 3, err
	})

	// A worker that fails (its containers exit 1; restartPolicy OnFailure): the operator deletes the pod
	// and creates it again, and the replacement completes the gang again.
	failed := "pytorch-gang-worker-0"
	old, err = client.CoreV1().Pods(ns).Get(ctx, failed, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	markFailed(t, ns, failed)
	waitFor(t, "the operator to restart failed "+failed+" and the gang to be whole again", 120*time.Second, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, failed, metav1.GetOptions{})
		if err != nil || p.UID == old.UID {
			return false, ignoreNotFound(err)
		}
		n, err := liveBound(ctx, ns, "pytorch-gang")
		return liveAndBound(p) && n == 3, err
	})
	waitEvent(t, ns, "pytorch-gang", "PyTorchJobRestarting", "Worker replica(s) failed", 30*time.Second)

	// Too big: 5 workers of 7 CPUs and a master of 1 (each fits a node of 8, together 36 of 32 CPUs).
	big := parseYAML(t, readExample(t, "training-operator-pytorchjob.yaml"))
	big.SetName("pytorch-too-big")
	unstructured.RemoveNestedField(big.Object, "spec", "runPolicy", "schedulingPolicy", "minAvailable")
	setReplicas(t, big, "pytorchReplicaSpecs", "Worker", 5, "7")
	createObject(t, pytorchJobGVR, ns, toYAML(t, big))
	if got := specOf(t, waitPodGroup(t, ns, "pytorch-too-big")); got.MinMember != 6 || !quantityEqual(got.MinResources["cpu"], "36") {
		t.Errorf("the too-big PyTorchJob's PodGroup spec = %+v, want minMember 6 (all replicas), cpu 36", got)
	}
	t.Logf("a member of the too-big PyTorchJob says: %s", waitGangHeld(t, ns, "pytorch-too-big", 6))
	deleteJob(t, pytorchJobGVR, ns, "pytorch-too-big")

	// The operator's scheduleTimeoutSeconds is the plugin's deadline: the master cannot be placed, the
	// workers reserve, wait up to 10 s for it, and are rejected together.
	slow := parseYAML(t, readExample(t, "training-operator-pytorchjob.yaml"))
	slow.SetName("pytorch-timeout")
	if err := unstructured.SetNestedField(slow.Object, int64(10), "spec", "runPolicy", "schedulingPolicy", "scheduleTimeoutSeconds"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedStringMap(slow.Object, map[string]string{"custom-scheduler.io/topology-required": "not a label key!"},
		"spec", "pytorchReplicaSpecs", "Master", "template", "metadata", "annotations"); err != nil {
		t.Fatal(err)
	}
	createObject(t, pytorchJobGVR, ns, toYAML(t, slow))
	if got := specOf(t, waitPodGroup(t, ns, "pytorch-timeout")); got.ScheduleTimeoutSeconds == nil || *got.ScheduleTimeoutSeconds != 10 {
		t.Errorf("the PodGroup's scheduleTimeoutSeconds = %v, want 10", got.ScheduleTimeoutSeconds)
	}
	// The plugin's message names the deadline it used: 10s, neither the default (60s) nor the example's 30s.
	t.Logf("PodGroup pytorch-timeout: %s", waitEvent(t, ns, "pytorch-timeout", "GangTimedOut", "within 10s", 60*time.Second).Message)
	if n, err := liveBound(ctx, ns, "pytorch-timeout"); err != nil || n != 0 {
		t.Errorf("after the timeout %d members of pytorch-timeout are bound (%v), want 0", n, err)
	}
	deleteJob(t, pytorchJobGVR, ns, "pytorch-timeout")

	// Deleting the job deletes its pods and its PodGroup.
	deleteJob(t, pytorchJobGVR, ns, "pytorch-gang")
}

// liveBound counts the group's live bound pods.
func liveBound(ctx context.Context, ns, group string) (int, error) {
	pods, err := groupPods(ctx, ns, group)
	n := 0
	for i := range pods {
		if liveAndBound(&pods[i]) {
			n++
		}
	}
	return n, err
}

// setReplicas sets a replica spec's count and its first container's CPU request.
func setReplicas(t *testing.T, obj *unstructured.Unstructured, specsField, replicaType string, replicas int64, cpu string) {
	t.Helper()
	path := []string{"spec", specsField, replicaType}
	if err := unstructured.SetNestedField(obj.Object, replicas, append(path, "replicas")...); err != nil {
		t.Fatal(err)
	}
	containers, _, _ := unstructured.NestedSlice(obj.Object, append(path, "template", "spec", "containers")...)
	c := containers[0].(map[string]any)
	c["resources"] = map[string]any{"requests": map[string]any{"cpu": cpu, "memory": "1Gi"}}
	if err := unstructured.SetNestedSlice(obj.Object, containers, append(path, "template", "spec", "containers")...); err != nil {
		t.Fatal(err)
	}
}

// deleteJob deletes a job object (background propagation, as kubectl does) and waits until its pods
// and its PodGroup (named after the job) are gone.
func deleteJob(t *testing.T, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	if err := dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	waitNoPods(t, ns, name)
	waitFor(t, "PodGroup "+name+" to be deleted with its job", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := getPodGroup(ctx, ns, name)
		return err != nil, ignoreNotFound(err)
	})
}
