package interop

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var mpiJobGVR = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v2beta1", Resource: "mpijobs"}

// mpiLockNamespace is where the MPI Operator takes its leader-election lease (it always leader-elects).
const mpiLockNamespace = "mpi-operator"

// startMPIOperator applies the MPIJob CRD from the module cache and runs mpi-operator with gang
// scheduling by custom-scheduler. Its health endpoint is on port 8080, fixed: nothing else here uses it.
func startMPIOperator(t *testing.T) *process {
	t.Helper()
	bin := operatorBinary(t, "mpi-operator")
	dir := moduleDir(t, "mpi-operator", "github.com/kubeflow/mpi-operator")
	// The Training Operator's v1 MPIJob CRD has the same name; the Training Operator test installs only
	// the PyTorchJob CRD, and each test deletes its CRDs when it ends.
	deleteCRDsAtEnd(t, applyFile(t, filepath.Join(dir, "manifests", "base", "kubeflow.org_mpijobs.yaml")))
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mpiLockNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := startOperator(t, "mpi-operator", bin, nil,
		"--kubeConfig="+kubeconfig, "--gang-scheduling="+schedulerName, "--lock-namespace="+mpiLockNamespace,
		"--kube-api-qps=50", "--kube-api-burst=100")
	waitFor(t, "the MPI Operator to lead", 60*time.Second, func(context.Context) (bool, error) {
		return strings.Contains(p.logText(), "Leading started"), nil
	})
	return p
}

// TestMPIOperator runs Kubeflow's MPI Operator v0.6.0 with --gang-scheduling=custom-scheduler against
// custom-scheduler:
//   - an MPIJob (launcher 1, workers 2) gets a PodGroup with minMember workers+1 = 3, minResources the
//     sum of the requests (cpu 5) and scheduleTimeoutSeconds 0, and its launcher (a pod of a batch Job,
//     made by the Job controller) and workers are bound whole;
//   - a deleted worker is recreated by the operator and the gang is whole again;
//   - an MPIJob too big for the cluster (each pod fits a node, the whole does not) holds nothing and its
//     pods say why;
//   - scheduleTimeoutSeconds 0 means the plugin's permitWaitingTimeSeconds (60 s as shipped): a job
//     whose launcher cannot be placed has its workers wait for the quorum until 60 s after the
//     attempt started (the PodGroup's WaitingForQuorum event names the deadline);
//   - deleting an MPIJob deletes its workers, its launcher Job and pod, and its PodGroup (garbage
//     collector, through the operator's owner references).
func TestMPIOperator(t *testing.T) {
	ns := testNamespace(t, "mpi")
	startMPIOperator(t)
	ctx := context.Background()

	createObject(t, mpiJobGVR, ns, readExample(t, "mpi-operator-mpijob.yaml"))
	pg := waitPodGroup(t, ns, "mpi-gang")
	spec := specOf(t, pg)
	if spec.MinMember != 3 || !quantityEqual(spec.MinResources["cpu"], "5") || spec.ScheduleTimeoutSeconds == nil || *spec.ScheduleTimeoutSeconds != 0 {
		t.Errorf("the MPI Operator's PodGroup spec = %+v, want minMember 3, minResources cpu 5, scheduleTimeoutSeconds 0", spec)
	}
	launcher := false
	for _, p := range waitGangBound(t, ns, "mpi-gang", 3) {
		if p.Spec.SchedulerName != schedulerName {
			t.Errorf("pod %s has schedulerName %q, want %q", p.Name, p.Spec.SchedulerName, schedulerName)
		}
		for _, o := range p.OwnerReferences {
			launcher = launcher || o.Kind == "Job"
		}
	}
	if !launcher {
		t.Error("no member of the gang is the launcher Job's pod")
	}

	// A deleted worker is recreated, and the replacement completes the gang again.
	replaced := "mpi-gang-worker-1"
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
		n, err := liveBound(ctx, ns, "mpi-gang")
		return liveAndBound(p) && n == 3, err
	})

	// Too big: 5 workers of 7 CPUs and a launcher of 1 (each fits a node of 8, together 36 of 32 CPUs).
	big := parseYAML(t, readExample(t, "mpi-operator-mpijob.yaml"))
	big.SetName("mpi-too-big")
	setReplicas(t, big, "mpiReplicaSpecs", "Worker", 5, "7")
	createObject(t, mpiJobGVR, ns, toYAML(t, big))
	if got := specOf(t, waitPodGroup(t, ns, "mpi-too-big")); got.MinMember != 6 || !quantityEqual(got.MinResources["cpu"], "36") {
		t.Errorf("the too-big MPIJob's PodGroup spec = %+v, want minMember 6, cpu 36", got)
	}
	t.Logf("a member of the too-big MPIJob says: %s", waitGangHeld(t, ns, "mpi-too-big", 6))
	deleteJob(t, mpiJobGVR, ns, "mpi-too-big")

	// scheduleTimeoutSeconds 0: the plugin's default deadline, 60 s from the attempt's start.
	slow := parseYAML(t, readExample(t, "mpi-operator-mpijob.yaml"))
	slow.SetName("mpi-timeout")
	if err := unstructured.SetNestedStringMap(slow.Object, map[string]string{"custom-scheduler.io/topology-required": "not a label key!"},
		"spec", "mpiReplicaSpecs", "Launcher", "template", "metadata", "annotations"); err != nil {
		t.Fatal(err)
	}
	createObject(t, mpiJobGVR, ns, toYAML(t, slow))
	ev := waitEvent(t, ns, "mpi-timeout", "WaitingForQuorum", "waiting until ", 60*time.Second)
	msg, at := ev.Message, ev.EventTime.Time
	if at.IsZero() {
		at = ev.FirstTimestamp.Time
	}
	deadline, err := time.Parse(time.RFC3339, strings.Fields(msg[strings.Index(msg, "waiting until ")+len("waiting until "):])[0])
	if err != nil {
		t.Fatalf("no deadline in %q: %v", msg, err)
	}
	// The event is sent 5 s into the attempt: the deadline is about 55 s after it (whole seconds).
	if left := deadline.Sub(at); left < 50*time.Second || left > 60*time.Second {
		t.Errorf("WaitingForQuorum at %v says %q: the deadline is %v after the event, want about 55s (60s from the attempt's start, the default for scheduleTimeoutSeconds 0)", at, msg, left)
	}
	t.Logf("PodGroup mpi-timeout (scheduleTimeoutSeconds 0): %s", msg)
	deleteJob(t, mpiJobGVR, ns, "mpi-timeout")

	// Deleting the MPIJob deletes its pods, its launcher Job and its PodGroup.
	deleteJob(t, mpiJobGVR, ns, "mpi-gang")
	waitFor(t, "the launcher Job to be deleted", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := client.BatchV1().Jobs(ns).Get(ctx, "mpi-gang-launcher", metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	})
}
