package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testControllers are the kube-controller-manager controllers the tests run: Jobs create and replace
// their pods, and a deleted Job's pods are deleted after it.
// An in-tree PodGroup is deleted once no pod uses it (the protection controller's finalizer).
// A pod's ResourceClaimTemplate becomes its ResourceClaim (the resourceclaim controller; DRA tests).
var testControllers = []string{"job-controller", "garbage-collector-controller", "podgroup-protection-controller", "resourceclaim-controller"}

// controllerManager is the package's kube-controller-manager process.
var controllerManager struct {
	once    sync.Once
	err     error
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

// needControllerManager makes sure kube-controller-manager (built by `make envtest` from go.mod) runs
// against the envtest apiserver. The first test that needs it starts it; it runs until TestMain ends.
func needControllerManager(t *testing.T) {
	t.Helper()
	cm := &controllerManager
	cm.once.Do(func() { cm.err = startControllerManager() })
	if cm.err != nil {
		t.Fatalf("starting kube-controller-manager: %v", cm.err)
	}
	select {
	case <-cm.exited:
		t.Fatalf("kube-controller-manager exited: %v\n%s", cm.cmd.ProcessState, controllerManagerLog(40))
	default:
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-controller-manager log (tail):\n%s", controllerManagerLog(40))
		}
	})
}

func startControllerManager() error {
	cm := &controllerManager
	kubeconfig, err := writeKubeconfig(scratchDir, "kube-controller-manager", []string{"system:masters"})
	if err != nil {
		return err
	}
	cm.logPath = filepath.Join(scratchDir, "kube-controller-manager.log")
	logFile, err := os.Create(cm.logPath)
	if err != nil {
		return fmt.Errorf("creating the controller manager's log: %w", err)
	}
	bin := filepath.Join(assets, "kube-controller-manager")
	cm.cmd = exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(testControllers, ","),
		"--leader-elect=false",
		// The Job controller writes a Workload and an in-tree PodGroup for every new Job (basic, or a
		// gang when the Job asks), and names it in the pods' spec.schedulingGroup. The resourceclaim
		// controller makes a PodGroup's claims from its templates (DRAWorkloadResourceClaims).
		"--feature-gates=GenericWorkload=true,WorkloadWithJob=true,DRAWorkloadResourceClaims=true",
		// No HTTPS endpoint: nothing here reads its metrics or health.
		"--secure-port=0",
		"--v=2")
	cm.cmd.Stdout, cm.cmd.Stderr = logFile, logFile
	// Stop it if the test binary dies without running TestMain's cleanup.
	cm.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cm.cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("running %s (built by `make envtest`): %w", bin, err)
	}
	cm.exited = make(chan struct{})
	go func() {
		_ = cm.cmd.Wait()
		logFile.Close()
		close(cm.exited)
	}()
	return nil
}

// stopControllerManager stops kube-controller-manager if a test started it.
func stopControllerManager() {
	cm := &controllerManager
	if cm.cmd == nil || cm.cmd.Process == nil {
		return
	}
	stopProcess(cm.cmd, cm.exited, 10*time.Second)
}

// stopProcess sends cmd's process SIGTERM and waits for exited, killing it after grace.
func stopProcess(cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// controllerManagerLog is the last n lines of the controller manager's log.
func controllerManagerLog(n int) string {
	data, err := os.ReadFile(controllerManager.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", controllerManager.logPath, err)
	}
	return tail(string(data), n)
}
