//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	fwk "k8s.io/kube-scheduler/framework"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"
)

const setupTimeout = time.Minute

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRD creates the CRD in file (once per apiserver) and waits until it is established.
func installCRD(ctx context.Context, cfg *rest.Config, file string) error {
	if cfg == nil {
		return fmt.Errorf("no kubeconfig")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	// controller-gen output: one document, possibly after a leading "---".
	doc := strings.TrimPrefix(strings.TrimSpace(string(data)), "---")
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := dc.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, setupTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := dc.Resource(crdGVR).Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// metricsServers remembers the apiservers that already have a metrics server (one per workload).
var metricsServers sync.Map

// serveNodeMetrics serves metrics.k8s.io/v1beta1 NodeMetrics for every node the scheduler knows, from a
// TLS server on loopback registered with the apiserver through an ExternalName Service and an
// APIService (the aggregation layer proxies to it, as it does to metrics-server). Each node reports a
// fixed usage between 10% and 40% of its allocatable, derived from its name, timestamped "now" at
// every request. It returns once NodeMetrics can be listed through the apiserver; the server stops
// with ctx.
func serveNodeMetrics(ctx context.Context, h fwk.Handle) error {
	cfg := h.KubeConfig()
	if cfg == nil {
		return fmt.Errorf("no kubeconfig")
	}
	if _, loaded := metricsServers.LoadOrStore(cfg.Host, true); loaded {
		return nil
	}
	nodes := h.SharedInformerFactory().Core().V1().Nodes().Lister()
	// Make sure the factory starts a node informer.
	h.SharedInformerFactory().Core().V1().Nodes().Informer()

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	server := httptest.NewUnstartedServer(&metricsHandler{nodes: func() ([]*v1.Node, error) { return nodes.List(labels.Everything()) }})
	server.Listener = listener
	server.StartTLS()
	go func() {
		<-ctx.Done()
		server.CloseClientConnections()
		server.Close()
	}()
	_, portText, _ := net.SplitHostPort(listener.Addr().String())
	port, _ := strconv.Atoi(portText)

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-metrics-server", Namespace: metav1.NamespaceDefault},
		Spec: v1.ServiceSpec{
			Type:         v1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []v1.ServicePort{{Name: "https", Port: int32(port), TargetPort: intstr.FromInt32(int32(port))}},
		},
	}
	if _, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the ExternalName service: %w", err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": "v1beta1.metrics.k8s.io"},
		"spec": map[string]any{
			"group":                 metricsv1beta1.GroupName,
			"version":               "v1beta1",
			"insecureSkipTLSVerify": true,
			"groupPriorityMinimum":  int64(100),
			"versionPriority":       int64(100),
			"service":               map[string]any{"namespace": svc.Namespace, "name": svc.Name, "port": int64(port)},
		},
	}}
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	if _, err := dc.Resource(gvr).Create(ctx, apiService, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the APIService: %w", err)
	}
	mc, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var lastErr error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, setupTimeout, true, func(ctx context.Context) (bool, error) {
		_, lastErr = mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		return lastErr == nil, nil
	}); err != nil {
		return fmt.Errorf("metrics.k8s.io not reachable through the apiserver: %v (last error: %v)", err, lastErr)
	}
	return nil
}

type metricsHandler struct {
	nodes func() ([]*v1.Node, error)
}

func (s *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const base = "/apis/metrics.k8s.io/v1beta1"
	gv := metav1.GroupVersionForDiscovery{GroupVersion: metricsv1beta1.SchemeGroupVersion.String(), Version: "v1beta1"}
	group := metav1.APIGroup{Name: metricsv1beta1.GroupName, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
	switch path := strings.TrimSuffix(r.URL.Path, "/"); {
	case path == "/apis":
		writeJSON(w, metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{group}})
	case path == "/apis/metrics.k8s.io":
		group.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		writeJSON(w, group)
	case path == base:
		writeJSON(w, metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: gv.GroupVersion,
			APIResources: []metav1.APIResource{{Name: "nodes", Kind: "NodeMetrics", Verbs: []string{"get", "list"}}},
		})
	case path == base+"/nodes":
		nodes, err := s.nodes()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		now := metav1.Now()
		list := metricsv1beta1.NodeMetricsList{TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: gv.GroupVersion}}
		list.Items = make([]metricsv1beta1.NodeMetrics, 0, len(nodes))
		for _, n := range nodes {
			list.Items = append(list.Items, nodeMetrics(n, now))
		}
		writeJSON(w, list)
	default:
		http.NotFound(w, r)
	}
}

// nodeMetrics is a node's reported usage: 10-40% of allocatable CPU and memory, fixed per node name.
func nodeMetrics(n *v1.Node, now metav1.Time) metricsv1beta1.NodeMetrics {
	h := fnv.New32a()
	_, _ = h.Write([]byte(n.Name))
	sum := h.Sum32()
	cpuPct := int64(10 + sum%31)
	memPct := int64(10 + (sum/31)%31)
	cpu := n.Status.Allocatable.Cpu().MilliValue() * cpuPct / 100
	mem := n.Status.Allocatable.Memory().Value() * memPct / 100
	return metricsv1beta1.NodeMetrics{
		TypeMeta:   metav1.TypeMeta{Kind: "NodeMetrics", APIVersion: metricsv1beta1.SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, CreationTimestamp: now},
		Timestamp:  now,
		Window:     metav1.Duration{Duration: 30 * time.Second},
		Usage: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
		},
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
