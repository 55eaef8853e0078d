package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/test/fakemetrics"
)

const (
	schedulerName = "custom-scheduler"
	podGroupLabel = "scheduling.x-k8s.io/pod-group"
	waitTimeout   = 60 * time.Second
	// The ServiceAccount the install binds to the metrics reader, as a user's Prometheus.
	prometheusNamespace = "monitoring"
	prometheusSA        = "prometheus"
)

var podGroupGVR = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}

// installValues are the values of the install test: Prometheus' ServiceAccount bound to the metrics
// reader, and LoadAware args passed through pluginConfig (a faster refresh, so the test does not wait
// 15 s for usage to change).
var installValues = map[string]any{
	"metrics": map[string]any{"prometheusServiceAccount": map[string]any{"name": prometheusSA, "namespace": prometheusNamespace}},
	"pluginConfig": []any{
		map[string]any{"name": "Coscheduling", "args": map[string]any{"permitWaitingTimeSeconds": 60, "podGroupBackoffSeconds": 1}},
		map[string]any{"name": "LoadAware", "args": map[string]any{
			"usageThresholds":               map[string]any{"cpu": 80, "memory": 90},
			"metricsRefreshIntervalSeconds": 1,
			// A pod's estimate is dropped once it has run this long and a sample came after.
			"estimation": map[string]any{"warmupSeconds": 1},
		}},
	},
}

// TestInstall installs the chart into a real apiserver (server-side apply of everything it renders),
// runs the scheduler binary as the chart's ServiceAccount with only the chart's RBAC and the chart's
// configuration, and drives a workload through it: plain pods, a gang, a gang that times out, a
// preemption of a whole gang, a node too hot for LoadAware that cools down. Then:
//   - nothing the scheduler did was forbidden;
//   - Prometheus' ServiceAccount, bound by the chart to the metrics reader, reads /metrics; a
//     ServiceAccount without the binding is refused;
//   - every metric and label in every dashboard query and alert expression is on that /metrics.
func TestInstall(t *testing.T) {
	c := useEnvtest(t)
	ctx := context.Background()
	r := mustRender(t, installValues)
	for _, ns := range []string{releaseNamespace, prometheusNamespace} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	applyAll(t, r.all())
	for _, sa := range []string{prometheusSA, "nobody"} {
		if _, err := c.CoreV1().ServiceAccounts(prometheusNamespace).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	// Node usage through the aggregated metrics.k8s.io API, as metrics-server serves it: one node hot.
	metrics := useMetricsServer(t)
	// A lease left by an earlier run's scheduler would make this one wait out its duration.
	if err := c.CoordinationV1().Leases(releaseNamespace).Delete(ctx, releaseName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	for _, n := range []struct{ name, cpu string }{{"plain-a", "8"}, {"plain-b", "8"}, {"gang", "4"}, {"slow", "2"}, {"small", "4"}, {"hot", "8"}} {
		createNode(t, c, n.name, n.cpu, map[string]string{"pool": n.name})
		metrics.SetNode(n.name, fakemetrics.NodeUsage{CPU: "500m", Memory: "1Gi"})
	}
	metrics.SetNode("hot", fakemetrics.NodeUsage{CPU: "7800m", Memory: "1Gi"})

	kubeconfig := serviceAccountKubeconfig(t, c, releaseNamespace, releaseName)
	port := freePort(t)
	sched := startScheduler(t, "custom-scheduler", "--config="+chartConfig(t, r, kubeconfig),
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		fmt.Sprintf("--secure-port=%d", port), "--bind-address=127.0.0.1", "--cert-dir="+t.TempDir(), "--v=2")
	waitFor(t, "the scheduler to acquire its lease", func(ctx context.Context) (bool, error) {
		if sched.exited() {
			return false, fmt.Errorf("the scheduler exited:\n%s", tail(sched.logText(), 30))
		}
		return strings.Contains(sched.logText(), "Successfully acquired lease"), nil
	})
	waitFor(t, "LoadAware to fetch node metrics", func(ctx context.Context) (bool, error) { return metrics.Requests() > 0, nil })

	ns := testNamespace(t, c)
	// Plain pods: enough scheduling cycles that upstream's sampled plugin metrics are recorded.
	for i := range 40 {
		createPod(t, c, pod(ns, fmt.Sprintf("plain-%d", i), "10m", map[string]string{"pool": []string{"plain-a", "plain-b"}[i%2]}))
	}
	// A gang of 3 that fits.
	createPodGroup(t, ns, "training", 3, 0)
	for i := range 3 {
		p := pod(ns, fmt.Sprintf("training-%d", i), "1", map[string]string{"pool": "gang"})
		p.Labels = map[string]string{podGroupLabel: "training"}
		createPod(t, c, p)
	}
	// A gang whose third member is held back (a malformed topology annotation, refused until fixed:
	// it counts toward minMember, a gated pod would not): two reserve, wait, and time out.
	createPodGroup(t, ns, "slow", 3, 2)
	for i := range 3 {
		p := pod(ns, fmt.Sprintf("slow-%d", i), "500m", map[string]string{"pool": "slow"})
		p.Labels = map[string]string{podGroupLabel: "slow"}
		if i == 2 {
			p.Annotations = map[string]string{"custom-scheduler.io/topology-required": "not a label key!"}
		}
		createPod(t, c, p)
	}
	// Preemption: a high-priority pod takes the place of low-priority ones.
	for _, pc := range []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10},
		{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
	} {
		if _, err := c.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// The victims are a low-priority gang of two: preempted whole.
	createPodGroup(t, ns, "batch", 2, 0)
	for i := range 2 {
		p := pod(ns, fmt.Sprintf("batch-%d", i), "1500m", map[string]string{"pool": "small"})
		p.Labels = map[string]string{podGroupLabel: "batch"}
		p.Spec.PriorityClassName = "low"
		createPod(t, c, p)
	}
	waitForBound(t, c, ns, "batch-0")
	waitForBound(t, c, ns, "batch-1")
	// No kubelet runs here: report the victims running, as a kubelet would, and let a sample come
	// after their warm-up, so LoadAware counts the node's measured usage (low) instead of estimates
	// for the victims, which a measured sample cannot take away (usage rejections are unresolvable).
	markRunning(t, c, ns, "batch-0")
	markRunning(t, c, ns, "batch-1")
	time.Sleep(3 * time.Second)
	high := pod(ns, "high", "3", map[string]string{"pool": "small"})
	high.Spec.PriorityClassName = "high"
	createPod(t, c, high)
	// A pod only the hot node could take: LoadAware filters it out until the node cools down.
	createPod(t, c, pod(ns, "on-hot", "100m", map[string]string{"pool": "hot"}))

	for i := range 40 {
		waitForBound(t, c, ns, fmt.Sprintf("plain-%d", i))
	}
	for i := range 3 {
		waitForBound(t, c, ns, fmt.Sprintf("training-%d", i))
	}
	waitForMessage(t, c, ns, "on-hot", "LoadAware")
	waitForEvent(t, c, ns, "slow-0", "GangTimedOut")
	for i := range 2 {
		name := fmt.Sprintf("batch-%d", i)
		waitFor(t, "the low-priority gang member "+name+" to be preempted", func(ctx context.Context) (bool, error) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return err == nil && p.DeletionTimestamp != nil, err
		})
	}
	metrics.SetNode("hot", fakemetrics.NodeUsage{CPU: "1", Memory: "1Gi"})
	waitForBound(t, c, ns, "on-hot")

	// Scraping: Prometheus' ServiceAccount reads /metrics, another one is refused.
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	if code, body := scrape(t, url, token(t, c, prometheusNamespace, "nobody")); code != http.StatusForbidden {
		t.Errorf("a ServiceAccount without the metrics-reader binding got %d from /metrics, want 403:\n%s", code, tail(body, 5))
	}
	code, body := scrape(t, url, token(t, c, prometheusNamespace, prometheusSA))
	if code != http.StatusOK {
		t.Fatalf("Prometheus' ServiceAccount got %d from /metrics:\n%s", code, tail(body, 5))
	}
	expo := parseExposition(t, body)

	queries := dashboardQueries(t)
	monitoring := mustRender(t, nil, monitoringAPIs...)
	queries = append(queries, alertQueries(t, monitoring.find("PrometheusRule", releaseName))...)
	for _, q := range queries {
		for _, problem := range checkQuery(expo, q) {
			t.Error(problem)
		}
	}
	if t.Failed() {
		t.Logf("metrics on /metrics: %v", sortedKeys(expo))
	}

	time.Sleep(2 * time.Second)
	if log := sched.logText(); strings.Contains(strings.ToLower(log), "forbidden") {
		t.Errorf("the scheduler was forbidden something with the chart's RBAC:\n%s", grepLines(log, "forbidden"))
	}
}

// TestMetricsReaderRBAC asks the apiserver whether the documented RBAC lets a client get /metrics:
// the ServiceAccount the chart binds may, any other may not.
func TestMetricsReaderRBAC(t *testing.T) {
	c := useEnvtest(t)
	r := mustRender(t, installValues)
	for _, ns := range []string{releaseNamespace, prometheusNamespace} {
		if _, err := c.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	applyAll(t, r.all())
	// The documented RBAC, checked by the apiserver itself: can Prometheus get /metrics?
	cases := map[string]struct {
		user string
		want bool
	}{
		"Prometheus' ServiceAccount (bound by the chart)": {user: "system:serviceaccount:" + prometheusNamespace + ":" + prometheusSA, want: true},
		"another ServiceAccount":                          {user: "system:serviceaccount:" + prometheusNamespace + ":nobody", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			allowed := canGetMetrics(t, c, tc.user)
			if allowed != tc.want {
				t.Errorf("%s may get /metrics: %v, want %v", tc.user, allowed, tc.want)
			}
		})
	}
}

// applyAll server-side applies objects, as `kubectl apply --server-side` (and Helm 4) does.
func applyAll(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	cl, err := ctrlclient.New(restConfig, ctrlclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		err := cl.Apply(context.Background(), ctrlclient.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
			ctrlclient.FieldOwner("custom-scheduler-chart-tests"), ctrlclient.ForceOwnership)
		if err != nil {
			t.Fatalf("server-side apply of %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			waitForCRD(t, obj.GetName())
		}
	}
}

// waitForCRD waits until the apiserver serves the CRD's resource.
func waitForCRD(t *testing.T, name string) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(restConfig)
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	waitFor(t, "CRD "+name+" to be established", func(ctx context.Context) (bool, error) {
		crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// chartConfig writes the chart's scheduler configuration with its client connection set to
// kubeconfig (in a cluster it is the pod's in-cluster connection).
func chartConfig(t *testing.T, r *rendered, kubeconfig string) string {
	t.Helper()
	cfg := schedulerConfig(t, r)
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func token(t *testing.T, c kubernetes.Interface, ns, sa string) string {
	t.Helper()
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s/%s: %v", ns, sa, err)
	}
	return tr.Status.Token
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as a ServiceAccount with a token
// from the TokenRequest API, as the pod would.
func serviceAccountKubeconfig(t *testing.T, c kubernetes.Interface, ns, sa string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restConfig.Host, CertificateAuthorityData: restConfig.CAData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: token(t, c, ns, sa)}
	cfg.Contexts[sa] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: sa}
	cfg.CurrentContext = sa
	path := filepath.Join(t.TempDir(), "serviceaccount.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// scrape GETs url with a bearer token, as Prometheus does (the serving certificate is self-signed).
func scrape(t *testing.T, url, bearer string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// parseExposition reads the Prometheus text format with Prometheus' own parser into sample names
// (histograms as their _bucket, _sum and _count series) and the label names seen on each.
func parseExposition(t *testing.T, body string) exposition {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	expo := exposition{}
	add := func(name string, labels map[string]bool) {
		if expo[name] == nil {
			expo[name] = map[string]bool{}
		}
		for l := range labels {
			expo[name][l] = true
		}
	}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := map[string]bool{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = true
			}
			switch {
			case m.GetHistogram() != nil:
				add(name+"_bucket", map[string]bool{"le": true})
				add(name+"_bucket", labels)
				add(name+"_sum", labels)
				add(name+"_count", labels)
			case m.GetSummary() != nil:
				add(name, map[string]bool{"quantile": true})
				add(name, labels)
				add(name+"_sum", labels)
				add(name+"_count", labels)
			default:
				add(name, labels)
			}
		}
	}
	return expo
}

// canGetMetrics asks the apiserver whether user may get the non-resource URL /metrics.
func canGetMetrics(t *testing.T, c kubernetes.Interface, user string) bool {
	t.Helper()
	review, err := c.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), subjectAccessReview(user), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed
}

func createNode(t *testing.T, c kubernetes.Interface, name, cpu string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("16Gi"), v1.ResourcePods: resource.MustParse("110")}
	node, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting node %s: %v", name, err)
		}
	})
	node.Status = v1.NodeStatus{Capacity: capacity, Allocatable: capacity, Phase: v1.NodeRunning, Conditions: []v1.NodeCondition{{
		Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}}
	if node, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking node %s ready: %v", name, err)
	}
	// No node lifecycle controller runs here to remove the not-ready taint admission added.
	node.Spec.Taints = nil
	if _, err := c.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("removing the taints of node %s: %v", name, err)
	}
}

func pod(ns, name, cpu string, nodeSelector map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PodSpec{
			SchedulerName: schedulerName,
			NodeSelector:  nodeSelector,
			Containers: []v1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("100Mi")},
			}}},
		},
	}
}

func createPod(t *testing.T, c kubernetes.Interface, p *v1.Pod) {
	t.Helper()
	if _, err := c.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

func createPodGroup(t *testing.T, ns, name string, minMember, timeoutSeconds int64) {
	t.Helper()
	spec := map[string]any{"minMember": minMember}
	if timeoutSeconds > 0 {
		spec["scheduleTimeoutSeconds"] = timeoutSeconds
	}
	pg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
	if _, err := dynamic.NewForConfigOrDie(restConfig).Resource(podGroupGVR).Namespace(ns).Create(context.Background(), pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodGroup %s/%s: %v", ns, name, err)
	}
}

func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func waitForBound(t *testing.T, c kubernetes.Interface, ns, name string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("pod %s/%s to be bound", ns, name), func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", err
	})
}

// waitForMessage waits until the pod's PodScheduled condition is False with a message containing substr.
func waitForMessage(t *testing.T, c kubernetes.Interface, ns, name, substr string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("pod %s/%s to be unschedulable because of %s", ns, name, substr), func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse && strings.Contains(cond.Message, substr) {
				return true, nil
			}
		}
		return false, nil
	})
}

func waitForEvent(t *testing.T, c kubernetes.Interface, ns, object, reason string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("a %s event for %s/%s", reason, ns, object), func(ctx context.Context) (bool, error) {
		events, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == object && e.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
}

// process is a custom-scheduler binary running for one test, its output in a log file.
type process struct {
	logPath string
	proc    *os.Process
	done    chan struct{}
}

func startScheduler(t *testing.T, name string, args ...string) *process {
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
	p := &process{logPath: logPath, proc: proc, done: make(chan struct{})}
	go func() {
		_, _ = proc.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.proc.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(15 * time.Second):
				_ = p.proc.Kill()
				<-p.done
			}
		}
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, tail(p.logText(), 60))
		}
	})
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) logText() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func grepLines(s, substr string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(line), substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func subjectAccessReview(user string) *authorizationv1.SubjectAccessReview {
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  user,
		Groups:                []string{"system:serviceaccounts", "system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}
}

var (
	metricsServerOnce sync.Once
	metricsServer     *fakemetrics.Server
	metricsServerErr  error
)

// useMetricsServer returns the package's metrics.k8s.io server (registered through an APIService on
// first use), reset (no nodes, healthy) for the calling test.
func useMetricsServer(t *testing.T) *fakemetrics.Server {
	t.Helper()
	metricsServerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		metricsServer, metricsServerErr = fakemetrics.Start(ctx, restConfig, metav1.NamespaceDefault, "test-metrics-server")
	})
	if metricsServerErr != nil {
		t.Fatalf("starting the metrics.k8s.io test server: %v", metricsServerErr)
	}
	metricsServer.Reset()
	t.Cleanup(metricsServer.Reset)
	return metricsServer
}

// testNamespace creates a namespace for one test's workload; its pods are deleted at once when the
// test ends (no kubelet runs here to stop them gracefully).
func testNamespace(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "workload-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := c.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting pods of %s: %v", ns.Name, err)
		}
		_ = c.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// markRunning reports a pod Running with its containers started now, as a kubelet would.
func markRunning(t *testing.T, c kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	p.Status.Phase = v1.PodRunning
	p.Status.StartTime = &now
	p.Status.ContainerStatuses = nil
	for _, ctr := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image, Ready: true, Started: ptr.To(true),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("reporting pod %s/%s running: %v", ns, name, err)
	}
}
