package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/custom-scheduler/custom-scheduler/test/operatorenv"
)

// JobSet v0.12.0 and Kubeflow Trainer v2.2.0, run as test/interop runs them (test/operatorenv): out of a
// cluster, their admission webhooks for real (registered to call them on loopback, for namespace demo),
// each with its own serving certificate and configuration (Trainer's certificate in the fixed folder its
// webhook server reads, its cert rotator off).
var (
	jobSetDir         = filepath.Join(os.TempDir(), "custom-scheduler-playground-jobset")
	jobSetWebhookPort = mustAtoi(freePort())
	jobSetHealthPort  = mustAtoi(freePort())
	trainerWebhook    = mustAtoi(freePort())
	trainerHealth     = mustAtoi(freePort())
	trainerConfig     = filepath.Join(os.TempDir(), "custom-scheduler-playground-trainer.yaml")
)

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

var jobSetOperator = operator{
	tool: "jobset", module: operatorenv.JobSetModule, pkg: "sigs.k8s.io/jobset",
	binary: "jobset", example: "jobset-jobset.yaml", group: "jobset-gang",
	crds:    []string{operatorenv.JobSetCRD},
	kubectl: []string{"get jobsets"},
	args: func(string) []string {
		return []string{"--config=" + filepath.Join(jobSetDir, "config.yaml"), "--metrics-bind-address=0"}
	},
	env:     func(kubeconfig string) []string { return []string{"KUBECONFIG=" + kubeconfig} },
	prepare: prepareJobSet,
	ready:   jobSetReady,
}

// Trainer makes a JobSet per TrainJob: JobSet runs first. Its webhook checks a TrainJob's runtime in its
// informer's cache, so the TrainJob is retried until the runtime just created is seen.
var trainerOperator = operator{
	tool: "trainer", module: operatorenv.TrainerModule, pkg: "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager",
	binary: "trainer-controller-manager", moreExamples: []string{"trainer-runtime.yaml"}, example: "trainer-trainjob.yaml", group: "trainjob-gang",
	crds:        []string{operatorenv.TrainerCRDs},
	needs:       []string{"jobset"},
	retryCreate: "must be created before the TrainJob is created",
	kubectl:     []string{"get trainjobs,jobsets,jobs", "get clustertrainingruntimes"},
	args:        func(string) []string { return operatorenv.TrainerArgs(trainerConfig) },
	env:         func(kubeconfig string) []string { return []string{"KUBECONFIG=" + kubeconfig} },
	prepare:     prepareTrainer,
	ready:       trainerReady,
}

func prepareJobSet(_ context.Context, _ kubernetes.Interface, _ string) error {
	certDir := filepath.Join(jobSetDir, "certs")
	certPEM, keyPEM, err := operatorenv.SelfSignedCA([]string{"jobset-playground", "localhost"}, 30*24*time.Hour)
	if err != nil {
		return err
	}
	if err := operatorenv.WriteKeyPair(certDir, certPEM, keyPEM); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(jobSetDir, "config.yaml"), []byte(operatorenv.JobSetConfig(jobSetHealthPort, jobSetWebhookPort, certDir)), 0o600)
}

// jobSetReady waits for JobSet's readiness and webhook server, then registers its webhooks (JobSet
// defaulting and validation, its pod webhooks) for namespace demo.
func jobSetReady(ctx context.Context, c kubernetes.Interface, p *process, moduleDir string) error {
	if err := waitOperatorReady(ctx, p, jobSetHealthPort, jobSetWebhookPort, nil); err != nil {
		return err
	}
	caPEM, err := os.ReadFile(filepath.Join(jobSetDir, "certs", "tls.crt"))
	if err != nil {
		return err
	}
	manifests, err := os.ReadFile(filepath.Join(moduleDir, operatorenv.JobSetWebhooks))
	if err != nil {
		return err
	}
	w, err := operatorenv.LoopbackWebhooks(manifests, "jobset-playground", jobSetWebhookPort, caPEM, "demo")
	if err != nil {
		return err
	}
	return w.Create(ctx, c)
}

// prepareTrainer writes Trainer's configuration and serving certificate and registers its webhooks
// (mutating and validating) for namespace demo.
func prepareTrainer(ctx context.Context, c kubernetes.Interface, moduleDir string) error {
	if err := os.WriteFile(trainerConfig, []byte(operatorenv.TrainerConfig(trainerHealth, trainerWebhook)), 0o600); err != nil {
		return err
	}
	certPEM, keyPEM, err := operatorenv.TrainerCert()
	if err != nil {
		return err
	}
	manifests, err := os.ReadFile(filepath.Join(moduleDir, operatorenv.TrainerWebhooks))
	if err != nil {
		return err
	}
	_, err = operatorenv.PrepareTrainer(ctx, c, certPEM, keyPEM, manifests, trainerWebhook, "demo")
	return err
}

// trainerReady waits for Trainer's readiness, its webhook server and its TrainJob controller.
func trainerReady(ctx context.Context, _ kubernetes.Interface, p *process, _ string) error {
	return waitOperatorReady(ctx, p, trainerHealth, trainerWebhook, func() bool {
		log, _ := os.ReadFile(p.logPath)
		return operatorenv.TrainerStarted(log)
	})
}

// waitOperatorReady waits (at most 3 minutes) for an operator's /readyz and webhook port, and for
// started when set; an operator that exits stops the wait at once.
func waitOperatorReady(ctx context.Context, p *process, healthPort, webhookPort int, started func() bool) error {
	name := filepath.Base(p.cmd.Path)
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-p.exited:
			p.exited <- err
			return false, fmt.Errorf("%s exited (%v); see %s", name, err, p.logPath)
		default:
		}
		return operatorenv.Ready(healthPort, webhookPort) && (started == nil || started()), nil
	}); err != nil {
		return fmt.Errorf("%s did not become ready: %w; see %s", name, err, p.logPath)
	}
	return nil
}
