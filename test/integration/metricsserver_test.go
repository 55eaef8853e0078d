package integration

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
	"testing"
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
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// metricsFailMode makes the test metrics server misbehave.
type metricsFailMode int

const (
	metricsOK metricsFailMode = iota
	// metricsError answers NodeMetrics requests with 500.
	metricsError
	// metricsSlow answers NodeMetrics requests only after metricsSlowDelay.
	metricsSlow
)

const metricsSlowDelay = 5 * time.Second

// nodeUsage is what the test metrics server reports for one node.
type nodeUsage struct {
	cpu, memory string
	// timestamp is the sample's time; zero means "now" at each request.
	timestamp time.Time
	window    time.Duration
}

// fakeMetricsServer serves metrics.k8s.io/v1beta1 NodeMetrics over TLS on loopback. It is registered
// with the apiserver through an APIService and an ExternalName Service, so clients reach it through the
// apiserver's aggregation layer exactly as they reach metrics-server.
type fakeMetricsServer struct {
	mu       sync.Mutex
	nodes    map[string]nodeUsage
	failMode metricsFailMode
	requests int
	server   *httptest.Server
}

var (
	metricsServerOnce sync.Once
	metricsServer     *fakeMetricsServer
	metricsServerErr  error
)

// useMetricsServer returns the package's test metrics server, starting and registering it on first
// use, and resets it (no nodes, healthy) for the calling test.
func useMetricsServer(t *testing.T) *fakeMetricsServer {
	t.Helper()
	metricsServerOnce.Do(func() {
		metricsServer, metricsServerErr = startMetricsServer()
	})
	if metricsServerErr != nil {
		t.Fatalf("starting the metrics.k8s.io test server: %v", metricsServerErr)
	}
	metricsServer.reset()
	t.Cleanup(metricsServer.reset)
	return metricsServer
}

func (s *fakeMetricsServer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes = map[string]nodeUsage{}
	s.failMode = metricsOK
}

// setNode sets a node's reported usage.
func (s *fakeMetricsServer) setNode(name string, u nodeUsage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes[name] = u
}

// setFailMode switches the server between healthy, erroring and slow.
func (s *fakeMetricsServer) setFailMode(m metricsFailMode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failMode = m
}

// requestCount is how many NodeMetrics requests the server has seen.
func (s *fakeMetricsServer) requestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *fakeMetricsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

func (s *fakeMetricsServer) serveNodes(w http.ResponseWriter, r *http.Request, name string) {
	s.mu.Lock()
	s.requests++
	mode := s.failMode
	now := time.Now()
	items := make([]metricsv1beta1.NodeMetrics, 0, len(s.nodes))
	for n, u := range s.nodes {
		if name != "" && n != name {
			continue
		}
		ts := u.timestamp
		if ts.IsZero() {
			ts = now
		}
		items = append(items, metricsv1beta1.NodeMetrics{
			TypeMeta:   metav1.TypeMeta{Kind: "NodeMetrics", APIVersion: metricsv1beta1.SchemeGroupVersion.String()},
			ObjectMeta: metav1.ObjectMeta{Name: n, CreationTimestamp: metav1.NewTime(now)},
			Timestamp:  metav1.NewTime(ts),
			Window:     metav1.Duration{Duration: u.window},
			Usage: v1.ResourceList{
				v1.ResourceCPU:    resource.MustParse(u.cpu),
				v1.ResourceMemory: resource.MustParse(u.memory),
			},
		})
	}
	s.mu.Unlock()

	switch mode {
	case metricsError:
		writeJSON(w, http.StatusInternalServerError, metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
			Message: "test metrics server: failing on purpose",
		})
		return
	case metricsSlow:
		select {
		case <-time.After(metricsSlowDelay):
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

// startMetricsServer starts the TLS server on loopback and registers it: an ExternalName Service
// pointing at localhost:<port>, and an APIService for metrics.k8s.io/v1beta1 backed by that Service
// (insecureSkipTLSVerify: the server's certificate is httptest's). It returns once the apiserver
// proxies NodeMetrics to it.
func startMetricsServer() (*fakeMetricsServer, error) {
	s := &fakeMetricsServer{nodes: map[string]nodeUsage{}}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.server = httptest.NewUnstartedServer(s)
	s.server.Listener = listener
	s.server.StartTLS()
	_, portText, _ := net.SplitHostPort(listener.Addr().String())
	port, _ := strconv.Atoi(portText)

	ctx := context.Background()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-server", Namespace: metav1.NamespaceDefault},
		Spec: v1.ServiceSpec{
			Type:         v1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []v1.ServicePort{{Name: "https", Port: int32(port), TargetPort: intstr.FromInt32(int32(port))}},
		},
	}
	if _, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
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
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, lastErr = mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		return lastErr == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("metrics.k8s.io never became reachable through the apiserver: %v (last error: %v)", err, lastErr)
	}
	return s, nil
}
