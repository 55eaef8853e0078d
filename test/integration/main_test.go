// Package integration proves custom-scheduler against a real kube-apiserver and etcd (envtest). The
// scheduler runs through its real command path: a KubeSchedulerConfiguration file, decoded into
// profiles, whose plugins come from the same registry the binary uses. Tests of workloads (Jobs) also
// run the real kube-controller-manager, started once for the package by the first test that needs it.
package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
)

// The control plane shared by every test in this package.
var (
	testEnv *envtest.Environment
	// restConfig is an admin connection to the apiserver.
	restConfig *rest.Config
	// client is an admin clientset.
	client kubernetes.Interface
	// adminKubeconfig is a kubeconfig file for an admin user, for schedulers under test.
	adminKubeconfig string
	// repoRoot is the module root, for manifests and the binary.
	repoRoot string
	// assets is the folder of kube-apiserver, etcd and kube-controller-manager.
	assets string
	// scratchDir holds the package's kubeconfigs and the controller manager's log.
	scratchDir string
)

// inTreeRuntimeConfig and inTreeAPIServerGates serve the in-tree workload API: topology
// constraints need TopologyAwareWorkloadScheduling, a Job's spec.scheduling WorkloadWithJob, a
// PodGroup's spec.resourceClaims (PodGroup-owned ResourceClaims, KEP-5729) DRAWorkloadResourceClaims,
// the CompositePodGroups of scheduling.k8s.io/v1alpha3 (jobs of several roles) CompositePodGroup.
const (
	inTreeRuntimeConfig  = "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true"
	inTreeAPIServerGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,WorkloadWithJob=true,DRAWorkloadResourceClaims=true,CompositePodGroup=true"
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// controller-runtime's client (used to apply the manifests) logs through klog like everything else.
	ctrllog.SetLogger(klog.NewKlogr())
	var err error
	repoRoot, err = findRepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	assets, err = assetsDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testEnv = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "manifests", "crds")},
		// The CRD folder arrives with the first plugin that needs one.
		ErrorIfCRDPathMissing: false,
	}
	// The in-tree workload API (scheduling.k8s.io/v1beta1 Workload and PodGroup), the second gang
	// source, is served as a cluster that turned it on serves it; the API-not-served case has its own
	// control plane (TestInTreeAPINotServed).
	testEnv.ControlPlane.GetAPIServer().Configure().
		Append("runtime-config", inTreeRuntimeConfig).
		Append("feature-gates", inTreeAPIServerGates)
	// The tests' own reading of group membership (groupPods, the watchers) sees in-tree groups too.
	podgroup.SetInTreeRead(true)
	restConfig, err = testEnv.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting envtest with assets from %s: %v\n", assets, err)
		return 1
	}
	defer func() {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}()
	client, err = kubernetes.NewForConfig(restConfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	scratchDir, err = os.MkdirTemp("", "custom-scheduler-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(scratchDir)
	adminKubeconfig, err = writeKubeconfig(scratchDir, "admin", []string{"system:masters"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Stopped before the apiserver (deferred later, runs first).
	defer stopControllerManager()
	return m.Run()
}

// writeKubeconfig makes an envtest user in the given groups and writes its kubeconfig into dir.
func writeKubeconfig(dir, name string, groups []string) (string, error) {
	user, err := testEnv.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return "", fmt.Errorf("adding envtest user %s: %w", name, err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("kubeconfig for %s: %w", name, err)
	}
	path := filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// assetsDir finds kube-apiserver, etcd and kube-controller-manager: KUBEBUILDER_ASSETS when set (the
// Makefile sets it), else the folder hack/envtest-assets.sh builds into.
func assetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if !filepath.IsAbs(dir) {
			// Relative to the module root, where make runs; tests run in their own folder.
			dir = filepath.Join(repoRoot, dir)
		}
		return dir, nil
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes").Output()
	if err != nil {
		return "", fmt.Errorf("reading the k8s.io/kubernetes version: %w", err)
	}
	dir := filepath.Join(repoRoot, "bin", "k8s", fmt.Sprintf("%s-%s-%s", strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), runtime.GOOS, runtime.GOARCH))
	for _, bin := range []string{"kube-apiserver", "etcd", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("envtest binary %s not found in %s: run `make envtest` (or set KUBEBUILDER_ASSETS)", bin, dir)
		}
	}
	return dir, nil
}

func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the test's folder")
		}
		dir = parent
	}
}
