// Package fakemetrics serves the metrics.k8s.io/v1beta1 NodeMetrics API from a TLS server on loopback,
// registered with an apiserver through an APIService, so clients reach it through the apiserver's
// aggregation layer exactly as they reach metrics-server. The integration tests control it per node
// (usage, sample time, failures); the playground feeds it simulated usage.
package fakemetrics

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// FailMode makes the server misbehave.
type FailMode int

const (
	// OK answers normally.
	OK FailMode = iota
	// Error answers NodeMetrics requests with 500.
	Error
	// Slow answers NodeMetrics requests only after SlowDelay.
	Slow
)

// SlowDelay is how long a Slow server takes to answer.
const SlowDelay = 5 * time.Second

// NodeUsage is what the server reports for one node.
type NodeUsage struct {
	CPU, Memory string
	// Timestamp is the sample's time; zero means "now" at each request.
	Timestamp time.Time
	Window    time.Duration
}

// Server serves metrics.k8s.io/v1beta1 NodeMetrics over TLS on loopback. It is registered
// with the apiserver through an APIService and an ExternalName Service, so clients reach it through the
// apiserver's aggregation layer exactly as they reach metrics-server.
type Server struct {
	mu    sync.Mutex
	nodes map[string]NodeUsage
	// nodesFunc, when set, replaces nodes: it is asked at every request.
	nodesFunc func() map[string]NodeUsage
	failMode  FailMode
	requests  int
	server    *httptest.Server
}

// Reset forgets every node and makes the server healthy.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes = map[string]NodeUsage{}
	s.nodesFunc = nil
	s.failMode = OK
}

// SetNode sets a node's reported usage.
func (s *Server) SetNode(name string, u NodeUsage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[name] = u
}

// SetNodesFunc makes the server report, at every request, the usage f returns instead of the nodes
// set with SetNode (nil goes back to those). f runs outside the server's lock.
func (s *Server) SetNodesFunc(f func() map[string]NodeUsage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodesFunc = f
}

// SetFailMode switches the server between healthy, erroring and slow.
func (s *Server) SetFailMode(m FailMode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failMode = m
}

// Requests is how many NodeMetrics requests the server has seen.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// ServeHTTP serves the metrics.k8s.io discovery documents and NodeMetrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const base = "/apis/metrics.k8s.io/v1beta1"
	switch path := strings.TrimSuffix(r.URL.Path, "/"); {
	case path == "/apis":
		writeJSON(w, http.StatusOK, metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups:   []metav1.APIGroup{metricsAPIGroup()},
		})
	case path == "/apis/metrics.k8s.io":
		g := metricsAPIGroup()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		writeJSON(w, http.StatusOK, g)
	case path == base:
		writeJSON(w, http.StatusOK, metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: metricsv1beta1.SchemeGroupVersion.String(),
			APIResources: []metav1.APIResource{
				{Name: "nodes", Kind: "NodeMetrics", Verbs: []string{"get", "list"}},
				{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: []string{"get", "list"}},
			},
		})
	case path == base+"/nodes" || strings.HasPrefix(path, base+"/nodes/"):
		s.serveNodes(w, r, strings.TrimPrefix(strings.TrimPrefix(path, base+"/nodes"), "/"))
	case path == base+"/pods" || strings.HasPrefix(path, base+"/namespaces/"):
		writeJSON(w, http.StatusOK, metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: metricsv1beta1.SchemeGroupVersion.String()}})
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) serveNodes(w http.ResponseWriter, r *http.Request, name string) {
	s.mu.Lock()
	s.requests++
	mode := s.failMode
	nodes, nodesFunc := s.nodes, s.nodesFunc
	if nodesFunc != nil {
		s.mu.Unlock()
		nodes = nodesFunc()
		s.mu.Lock()
	}
	now := time.Now()
	items := make([]metricsv1beta1.NodeMetrics, 0, len(nodes))
	for n, u := range nodes {
		if name != "" && n != name {
			continue
		}
		ts := u.Timestamp
		if ts.IsZero() {
			ts = now
		}
		items = append(items, metricsv1beta1.NodeMetrics{
			TypeMeta:   metav1.TypeMeta{Kind: "NodeMetrics", APIVersion: metricsv1beta1.SchemeGroupVersion.String()},
			ObjectMeta: metav1.ObjectMeta{Name: n, CreationTimestamp: metav1.NewTime(now)},
			Timestamp:  metav1.NewTime(ts),
			Window:     metav1.Duration{Duration: u.Window},
			Usage: v1.ResourceList{
				v1.ResourceCPU:    resource.MustParse(u.CPU),
				v1.ResourceMemory: resource.MustParse(u.Memory),
			},
		})
	}
	s.mu.Unlock()

	switch mode {
	case Error:
		writeJSON(w, http.StatusInternalServerError, metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
			Message: "fake metrics server: failing on purpose",
		})
		return
	case Slow:
		select {
		case <-time.After(SlowDelay):
		case <-r.Context().Done():
			return
		}
	}
	if name != "" {
		if len(items) == 0 {
			writeJSON(w, http.StatusNotFound, metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status:   metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
				Message: fmt.Sprintf("nodemetrics %q not found", name),
			})
			return
		}
		writeJSON(w, http.StatusOK, items[0])
		return
	}
	writeJSON(w, http.StatusOK, metricsv1beta1.NodeMetricsList{
		TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: metricsv1beta1.SchemeGroupVersion.String()},
		Items:    items,
	})
}

func metricsAPIGroup() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: metricsv1beta1.SchemeGroupVersion.String(), Version: "v1beta1"}
	return metav1.APIGroup{Name: metricsv1beta1.GroupName, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Start starts the server on loopback and registers it with the apiserver behind restConfig: an
// ExternalName Service serviceNamespace/serviceName pointing at localhost:<port>, and an APIService for
// metrics.k8s.io/v1beta1 backed by it (insecureSkipTLSVerify: the certificate is httptest's). It
// returns once the apiserver proxies NodeMetrics to it, or when ctx ends.
func Start(ctx context.Context, restConfig *rest.Config, serviceNamespace, serviceName string) (*Server, error) {
	s := &Server{nodes: map[string]NodeUsage{}}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.server = httptest.NewUnstartedServer(s)
	s.server.Listener = listener
	s.server.StartTLS()
	_, portText, _ := net.SplitHostPort(listener.Addr().String())
	port, _ := strconv.Atoi(portText)

	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, err
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName, Namespace: serviceNamespace},
		Spec: v1.ServiceSpec{
			Type:         v1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []v1.ServicePort{{Name: "https", Port: int32(port), TargetPort: intstr.FromInt32(int32(port))}},
		},
	}
	if _, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the ExternalName service: %w", err)
	}
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return nil, err
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
			"service": map[string]any{
				"namespace": svc.Namespace,
				"name":      svc.Name,
				"port":      int64(port),
			},
		},
	}}
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	if _, err := dyn.Resource(gvr).Create(ctx, apiService, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the APIService: %w", err)
	}
	mc, err := metricsclient.NewForConfig(restConfig)
	if err != nil {
		return nil, err
	}
	var lastErr error
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, lastErr = mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		return lastErr == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("metrics.k8s.io never became reachable through the apiserver: %v (last error: %v)", err, lastErr)
	}
	return s, nil
}

// Close stops serving.
func (s *Server) Close() { s.server.Close() }
