package chart

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The control plane of the install tests, started once by the first test that needs it.
var (
	envOnce    sync.Once
	envErr     error
	testEnv    *envtest.Environment
	restConfig *rest.Config
	client     kubernetes.Interface
)

func TestMain(m *testing.M) {
	code := m.Run()
	if testEnv != nil {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}
	os.Exit(code)
}

// useEnvtest starts kube-apiserver and etcd (once) and returns an admin clientset.
func useEnvtest(t *testing.T) kubernetes.Interface {
	t.Helper()
	envOnce.Do(func() {
		var assets string
		if assets, envErr = assetsDir(); envErr != nil {
			return
		}
		testEnv = &envtest.Environment{BinaryAssetsDirectory: assets}
		if restConfig, envErr = testEnv.Start(); envErr != nil {
			envErr = fmt.Errorf("starting envtest with assets from %s: %w", assets, envErr)
			return
		}
		client, envErr = kubernetes.NewForConfig(restConfig)
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return client
}

// assetsDir finds kube-apiserver and etcd: KUBEBUILDER_ASSETS (which `make test` sets), else the
// folder `make envtest` builds into.
func assetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	dirs, err := filepath.Glob(filepath.Join(repoRoot(), "bin", "k8s", fmt.Sprintf("*-%s-%s", runtime.GOOS, runtime.GOARCH)))
	if err != nil {
		return "", err
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no kube-apiserver under bin/k8s: run `make envtest` (or set KUBEBUILDER_ASSETS)")
}

// binaryPath is the custom-scheduler binary: CUSTOM_SCHEDULER_BINARY (which `make test` sets), else
// one built once here by `make build`.
var binaryPath = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("CUSTOM_SCHEDULER_BINARY"); p != "" {
		return p, nil
	}
	cmd := exec.Command("make", "build")
	cmd.Dir = repoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make build: %w\n%s", err, b)
	}
	return filepath.Join(repoRoot(), "bin", "custom-scheduler"), nil
})
