package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned"
)

// playground is a playground run by a test, as `make run` runs it.
type playground struct {
	t         *testing.T
	ctx       context.Context
	clientset kubernetes.Interface
	pgClient  versioned.Interface
	ready     chan struct{}
	done      chan error
	cancel    context.CancelFunc
	stopped   bool
}

// startPlayground runs the playground with o (assets, scheduler, configuration, workloads and folder
// filled in) for at most timeout, and returns once its kubeconfig is written. It starts a whole cluster,
// so it runs only when asked: `make test-playground` sets PLAYGROUND_ASSETS (a folder with
// kube-apiserver, etcd, kube-controller-manager and kwok, from hack/envtest-assets.sh --all) and
// CUSTOM_SCHEDULER_BINARY (default bin/custom-scheduler).
func startPlayground(t *testing.T, o options, timeout time.Duration) *playground {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a whole playground")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	assets := os.Getenv("PLAYGROUND_ASSETS")
	if assets == "" {
		t.Skip("PLAYGROUND_ASSETS is not set (make test-playground)")
	}
	if !filepath.IsAbs(assets) {
		assets = filepath.Join(root, assets)
	}
	for _, b := range []string{"kube-apiserver", "etcd", "kube-controller-manager", "kwok"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			t.Fatalf("no %s in PLAYGROUND_ASSETS=%s (hack/envtest-assets.sh --all): %v", b, assets, err)
		}
	}
	scheduler := os.Getenv("CUSTOM_SCHEDULER_BINARY")
	if scheduler == "" {
		scheduler = filepath.Join(root, "bin", "custom-scheduler")
	}
	if _, err := os.Stat(scheduler); err != nil {
		t.Fatalf("no scheduler binary (make build, or CUSTOM_SCHEDULER_BINARY): %v", err)
	}
	t.Chdir(root) // the playground reads manifests/ and examples/ from the module root

	o.assets, o.schedulerBin, o.configPath, o.workloadsDir, o.dir = assets, scheduler, "manifests/base/scheduler-config.yaml", "examples/playground", t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	p := &playground{t: t, ctx: ctx, cancel: cancel, ready: make(chan struct{}), done: make(chan error, 1)}
	o.ready = p.ready
	go func() { p.done <- run(ctx, o) }()
	t.Cleanup(p.stop)

	// The playground writes its kubeconfig once the apiserver runs (after it built an operator, with
	// --operator).
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case err := <-p.done:
			p.stopped = true
			return false, fmt.Errorf("playground ended early: %v", err)
		default:
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(o.dir, "kubeconfig"))
		if err != nil {
			return false, nil
		}
		if p.clientset, err = kubernetes.NewForConfig(cfg); err != nil {
			return false, err
		}
		p.pgClient, err = versioned.NewForConfig(cfg)
		return err == nil, err
	}); err != nil {
		t.Fatalf("waiting for the playground's kubeconfig: %v", err)
	}
	return p
}

// waitReady waits until the playground printed where pods landed.
func (p *playground) waitReady() {
	p.t.Helper()
	select {
	case <-p.ready:
	case err := <-p.done:
		p.stopped = true
		p.t.Fatalf("playground ended before it was ready: %v", err)
	case <-p.ctx.Done():
		p.t.Fatal("playground not ready in time")
	}
}

// stop stops the playground (once) and reports its error.
func (p *playground) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	p.cancel()
	if err := <-p.done; err != nil {
		p.t.Errorf("playground: %v", err)
	}
}
