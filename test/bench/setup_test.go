//go:build bench

package bench

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/test/fakemetrics"
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

// serveNodeMetrics serves metrics.k8s.io/v1beta1 NodeMetrics for every node the scheduler knows, from
// the fake metrics-server the integration tests use (TLS on loopback, registered through an
// ExternalName Service and an APIService, so the aggregation layer proxies to it as it does to
// metrics-server). Each node reports a fixed usage between 10% and 40% of its allocatable, derived
// from its name, timestamped "now" at every request. It returns once NodeMetrics can be listed through
// the apiserver; the server stops with ctx.
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

	setupCtx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	server, err := fakemetrics.Start(setupCtx, cfg, metav1.NamespaceDefault, "bench-metrics-server")
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, server.Close)
	server.SetNodesFunc(func() map[string]fakemetrics.NodeUsage {
		list, err := nodes.List(labels.Everything())
		if err != nil {
			return nil
		}
		usage := make(map[string]fakemetrics.NodeUsage, len(list))
		for _, n := range list {
			usage[n.Name] = nodeUsage(n)
		}
		return usage
	})
	return nil
}

// nodeUsage is a node's reported usage: 10-40% of allocatable CPU and memory, fixed per node name.
func nodeUsage(n *v1.Node) fakemetrics.NodeUsage {
	h := fnv.New32a()
	_, _ = h.Write([]byte(n.Name))
	sum := h.Sum32()
	cpuPct := int64(10 + sum%31)
	memPct := int64(10 + (sum/31)%31)
	return fakemetrics.NodeUsage{
		CPU:    fmt.Sprintf("%dm", n.Status.Allocatable.Cpu().MilliValue()*cpuPct/100),
		Memory: fmt.Sprintf("%d", n.Status.Allocatable.Memory().Value()*memPct/100),
		Window: 30 * time.Second,
	}
}
