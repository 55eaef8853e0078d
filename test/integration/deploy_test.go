package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/status"
	"github.com/custom-scheduler/custom-scheduler/test/fakemetrics"
)

const (
	deployNamespace      = "custom-scheduler"
	deployServiceAccount = "custom-scheduler"
	leaseName            = "custom-scheduler"
)

// applyOrder is the order kinds are applied in, so that what an object needs exists before it.
var applyOrder = map[string]int{"Namespace": 0, "CustomResourceDefinition": 1, "ServiceAccount": 2, "ClusterRole": 3, "Role": 3, "ClusterRoleBinding": 4, "RoleBinding": 4, "ConfigMap": 5}

// renderManifests renders manifests/ with kustomize, exactly what `kubectl apply -k manifests/` sends.
func renderManifests(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot, "manifests"))
	if err != nil {
		t.Fatalf("kustomize build manifests/: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			t.Fatalf("rendered manifest is not an object: %v", err)
		}
		objs = append(objs, obj)
	}
	sort.SliceStable(objs, func(i, j int) bool {
		oi, ok := applyOrder[objs[i].GetKind()]
		if !ok {
			oi = 10
		}
		oj, ok := applyOrder[objs[j].GetKind()]
		if !ok {
			oj = 10
		}
		return oi < oj
	})
	return objs
}

// applyAll server-side applies every rendered manifest, as `kubectl apply --server-side -k manifests/`
// does, and returns them.
func applyAll(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	c, err := ctrlclient.New(restConfig, ctrlclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs := renderManifests(t)
	// A lease left by an earlier test's replicas would make this test's wait out its duration.
	if err := client.CoordinationV1().Leases(deployNamespace).Delete(context.Background(), leaseName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	for _, obj := range objs {
		err := c.Apply(context.Background(), ctrlclient.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
			ctrlclient.FieldOwner("custom-scheduler-tests"), ctrlclient.ForceOwnership)
		if err != nil {
			t.Fatalf("server-side apply of %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return objs
}

// TestManifestsApply: every manifest is accepted by the apiserver.
func TestManifestsApply(t *testing.T) {
	objs := applyAll(t)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	for _, want := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget"} {
		if kinds[want] == 0 {
			t.Errorf("manifests have no %s", want)
		}
	}
	// Every generated CRD is in the kustomization.
	crdFiles, err := filepath.Glob(filepath.Join(repoRoot, "manifests", "crds", "*_*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if kinds["CustomResourceDefinition"] != len(crdFiles) {
		t.Errorf("manifests render %d CRDs, manifests/crds has %d CRD files: list them in manifests/crds/kustomization.yaml", kinds["CustomResourceDefinition"], len(crdFiles))
	}
	// The Deployment mounts the generated ConfigMap (kustomize rewrote the name with its hash).
	var cmName, mounted string
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			cmName = o.GetName()
		case "Deployment":
			vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				if name, ok, _ := unstructured.NestedString(v.(map[string]interface{}), "configMap", "name"); ok {
					mounted = name
				}
			}
		}
	}
	if cmName == "" || cmName != mounted {
		t.Errorf("Deployment mounts ConfigMap %q, manifests define %q", mounted, cmName)
	}
}

// deployedConfig returns the scheduler configuration from the manifests' ConfigMap with its client
// connection set to kubeconfig (in a cluster it is the pod's in-cluster connection).
func deployedConfig(t *testing.T, objs []*unstructured.Unstructured, kubeconfig string) string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" || !strings.HasPrefix(o.GetName(), "custom-scheduler-config") {
			continue
		}
		data, _, _ := unstructured.NestedString(o.Object, "data", "scheduler-config.yaml")
		var cfg map[string]interface{}
		if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
			t.Fatalf("parsing the ConfigMap's configuration: %v", err)
		}
		cfg["clientConnection"] = map[string]interface{}{"kubeconfig": kubeconfig}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return writeFile(t, "scheduler-config.yaml", string(out))
	}
	t.Fatal("no custom-scheduler-config ConfigMap in the manifests")
	return ""
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the manifests' ServiceAccount with
// a token from the TokenRequest API, as the pod would.
func serviceAccountKubeconfig(t *testing.T) string {
	t.Helper()
	tr, err := client.CoreV1().ServiceAccounts(deployNamespace).CreateToken(context.Background(), deployServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for the ServiceAccount: %v", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restConfig.Host, CertificateAuthorityData: restConfig.CAData}
	cfg.AuthInfos["custom-scheduler"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["custom-scheduler"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "custom-scheduler"}
	cfg.CurrentContext = "custom-scheduler"
	path := filepath.Join(t.TempDir(), "serviceaccount.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startDeployedScheduler runs the binary as the Deployment does: the ConfigMap's configuration, the
// ServiceAccount's credentials for everything (client, delegated authentication and authorization) and
// secure serving on a free port.
func startDeployedScheduler(t *testing.T, name, config, kubeconfig string) *binaryProcess {
	t.Helper()
	return startBinary(t, name, "--config="+config,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		fmt.Sprintf("--secure-port=%d", freePort(t)), "--bind-address=127.0.0.1", "--cert-dir="+t.TempDir(), "--v=2")
}

// TestDeployedWithLeastPrivilege runs the scheduler with the ConfigMap's configuration as the
// ServiceAccount, with only the RBAC from manifests/: it schedules, and nothing it does is forbidden.
func TestDeployedWithLeastPrivilege(t *testing.T) {
	objs := applyAll(t)
	kubeconfig := serviceAccountKubeconfig(t)
	ns := testNamespace(t)
	createNode(t, "deployed-node", "4", "8Gi", nil)
	sched := startDeployedScheduler(t, "deployed", deployedConfig(t, objs, kubeconfig), kubeconfig)
	waitForLeader(t, sched)

	// LoadAware reads node usage through the aggregated metrics.k8s.io API.
	metrics := useMetricsServer(t)
	metrics.SetNode("deployed-node", fakemetrics.NodeUsage{CPU: "1", Memory: "1Gi"})

	pod := createPod(t, st.MakePod().Namespace(ns).Name("plain").SchedulerName(schedulerName).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Container("pause").Obj())
	if node := waitForPodBound(t, ns, pod.Name); node != "deployed-node" {
		t.Fatalf("bound to %q", node)
	}

	// A gang: the PodGroup is read from the cluster and its status written back.
	createPodGroup(t, ns, "deployed-gang", 3, 0)
	createGang(t, ns, "deployed-gang", 3, "500m")
	waitForBoundMembers(t, ns, "deployed-gang", 3)
	waitFor(t, ns, "the PodGroup's status to count its scheduled members", func(ctx context.Context) (bool, error) {
		return getPodGroup(t, ns, "deployed-gang").Status.Scheduled == 3, nil
	})
	// An in-tree gang (the package's apiserver serves scheduling.k8s.io/v1beta1): read, and its
	// PodGroupInitiallyScheduled condition patched, with the manifests' rights.
	createInTreePodGroup(t, ns, "deployed-in-tree", inTreeSpec(2))
	createInTreeGang(t, ns, "deployed-in-tree", 2, "500m")
	waitForBoundMembers(t, ns, inTree("deployed-in-tree"), 2)
	waitForInTreeCondition(t, ns, "deployed-in-tree", schedulingv1beta1.PodGroupInitiallyScheduled, metav1.ConditionTrue, "Scheduled")
	// A job of several roles on the in-tree API (v1alpha3 is served too): its CompositePodGroup's
	// condition patched, with the manifests' rights.
	createComposite(t, ns, "deployed-job", "", 1)
	roleSpec := inTreeSpec(1)
	roleSpec.ParentCompositePodGroupName = ptr.To("deployed-job")
	roleSpec.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: "serve", TemplateName: "deployed-role"}
	createInTreePodGroup(t, ns, "deployed-role", roleSpec)
	createInTreeGang(t, ns, "deployed-role", 1, "250m")
	waitForBoundMembers(t, ns, inTree("deployed-role"), 1)
	waitForCompositeCondition(t, ns, "deployed-job", status.ConditionCompositeInitiallyScheduled, metav1.ConditionTrue, status.ReasonScheduled)
	waitFor(t, ns, "LoadAware to fetch node metrics", func(ctx context.Context) (bool, error) {
		return metrics.Requests() > 0, nil
	})
	// Give informers of every kind a moment to list and watch, then read the log.
	time.Sleep(2 * time.Second)
	if log := sched.logText(); strings.Contains(strings.ToLower(log), "forbidden") {
		t.Errorf("the scheduler was forbidden something with the manifests' RBAC:\n%s", grepLines(log, "forbidden"))
	}
}

// TestSideBySide runs a default-scheduler instance (our binary with only the default profile, and its
// own lease) next to custom-scheduler: each binds only its own pods.
func TestSideBySide(t *testing.T) {
	objs := applyAll(t)
	kubeconfig := serviceAccountKubeconfig(t)
	ns := testNamespace(t)
	createNode(t, "shared-node", "8", "16Gi", nil)

	defaultConfig := writeFile(t, "default-scheduler.yaml", fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: true
  resourceName: default-scheduler-under-test
  resourceNamespace: kube-system
`, adminKubeconfig))
	def := startBinary(t, "default-scheduler", "--config="+defaultConfig, "--secure-port=0")
	ours := startDeployedScheduler(t, "custom-scheduler", deployedConfig(t, objs, kubeconfig), kubeconfig)
	waitForLeader(t, ours)

	var pods []*v1.Pod
	for i := 0; i < 3; i++ {
		pods = append(pods,
			createPod(t, st.MakePod().Namespace(ns).Name(fmt.Sprintf("ours-%d", i)).SchedulerName(schedulerName).Container("pause").Obj()),
			createPod(t, st.MakePod().Namespace(ns).Name(fmt.Sprintf("default-%d", i)).SchedulerName(v1.DefaultSchedulerName).Container("pause").Obj()))
	}
	for _, p := range pods {
		waitForPodBound(t, ns, p.Name)
		e := waitForEvent(t, ns, p.Name, "Scheduled", "")
		if got := eventSource(e); got != p.Spec.SchedulerName {
			t.Errorf("pod %s (schedulerName %s) was scheduled by %s", p.Name, p.Spec.SchedulerName, got)
		}
	}
	assertScheduledOnce(t, ns)
	if def.exited() {
		t.Errorf("the default-scheduler instance exited:\n%s", tail(def.logText(), 20))
	}
}

// TestHighAvailability runs two replicas as the Deployment does; when the leader dies the other takes
// the lease and schedules new pods, and no pod is bound twice.
func TestHighAvailability(t *testing.T) {
	objs := applyAll(t)
	kubeconfig := serviceAccountKubeconfig(t)
	config := deployedConfig(t, objs, kubeconfig)
	ns := testNamespace(t)
	createNode(t, "ha-node", "8", "16Gi", nil)

	a := startDeployedScheduler(t, "replica-a", config, kubeconfig)
	b := startDeployedScheduler(t, "replica-b", config, kubeconfig)
	leader := waitForLeader(t, a, b)
	follower := a
	if leader == a {
		follower = b
	}

	before := createPod(t, st.MakePod().Namespace(ns).Name("before-failover").SchedulerName(schedulerName).Container("pause").Obj())
	waitForPodBound(t, ns, before.Name)
	// A gang runs under the leader, which writes its status.
	createPodGroup(t, ns, "ha-gang", 3, 0)
	gang := createGang(t, ns, "ha-gang", 3, "500m")
	waitForBoundMembers(t, ns, "ha-gang", 3)
	waitFor(t, ns, "the leader to write the gang's status", func(ctx context.Context) (bool, error) {
		status := getPodGroup(t, ns, "ha-gang").Status
		return status.Scheduled == 3 && status.Phase == v1alpha1.PodGroupScheduled, nil
	})

	// The leader crashes: no graceful release, the follower must wait out the lease. Meanwhile a
	// member of the gang finishes.
	leader.kill(t, syscall.SIGKILL)
	finished, err := client.CoreV1().Pods(ns).Get(context.Background(), gang[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	finished.Status.Phase = v1.PodSucceeded
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(context.Background(), finished, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := waitForLeader(t, follower); got != follower {
		t.Fatalf("the follower did not take over")
	}
	// The new leader recomputes every PodGroup's status when it starts leading, without any gang to
	// schedule: the finished member no longer counts as scheduled.
	waitFor(t, ns, "the new leader to bring the gang's status up to date", func(ctx context.Context) (bool, error) {
		status := getPodGroup(t, ns, "ha-gang").Status
		return status.Succeeded == 1 && status.Scheduled == 2, nil
	})
	after := createPod(t, st.MakePod().Namespace(ns).Name("after-failover").SchedulerName(schedulerName).Container("pause").Obj())
	waitForPodBound(t, ns, after.Name)
	assertScheduledOnce(t, ns)
}

// waitForLeader waits until the custom-scheduler lease is held by one of the processes, which it
// recognizes by the "Successfully acquired lease" line in its log, and returns that process.
func waitForLeader(t *testing.T, procs ...*binaryProcess) *binaryProcess {
	t.Helper()
	var leader *binaryProcess
	waitFor(t, deployNamespace, "a replica to acquire the lease", func(ctx context.Context) (bool, error) {
		for _, p := range procs {
			if p.exited() {
				return false, fmt.Errorf("%s exited:\n%s", p.name, tail(p.logText(), 30))
			}
			if strings.Contains(p.logText(), "Successfully acquired lease") {
				leader = p
			}
		}
		if leader == nil {
			return false, nil
		}
		lease, err := client.CoordinationV1().Leases(deployNamespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return leaseHeld(lease), nil
	})
	return leader
}

func leaseHeld(l *coordinationv1.Lease) bool {
	return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
}

// assertScheduledOnce checks that no pod in ns was bound more than once: exactly one Scheduled event
// each.
func assertScheduledOnce(t *testing.T, ns string) {
	t.Helper()
	events, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scheduled := map[string]int32{}
	for _, e := range events.Items {
		if e.Reason == "Scheduled" {
			scheduled[e.InvolvedObject.Name] += max(e.Count, 1)
		}
	}
	for pod, n := range scheduled {
		if n != 1 {
			t.Errorf("pod %s was scheduled %d times", pod, n)
		}
	}
}

// binaryProcess is a custom-scheduler binary running for one test, its output in a log file.
type binaryProcess struct {
	name    string
	logPath string
	proc    *os.Process
	done    chan struct{}
}

// startBinary starts the binary with args; it is stopped (SIGTERM, then SIGKILL) when the test ends,
// and its log tail is printed if the test failed.
func startBinary(t *testing.T, name string, args ...string) *binaryProcess {
	t.Helper()
	bin, err := binaryPath()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	proc, err := os.StartProcess(bin, append([]string{bin}, args...), &os.ProcAttr{Files: []*os.File{nil, logFile, logFile}})
	if err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &binaryProcess{name: name, logPath: logPath, proc: proc, done: make(chan struct{})}
	go func() {
		_, _ = proc.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill(t, syscall.SIGTERM)
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, tail(p.logText(), 60))
		}
	})
	return p
}

func (p *binaryProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends sig and waits for the process to end (SIGKILL after 15s).
func (p *binaryProcess) kill(t *testing.T, sig syscall.Signal) {
	if p.exited() {
		return
	}
	_ = p.proc.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.proc.Kill()
		<-p.done
	}
}

func (p *binaryProcess) logText() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// freePort returns a TCP port on loopback that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// grepLines returns the lines of s that contain substr (case-insensitive).
func grepLines(s, substr string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(line), substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
