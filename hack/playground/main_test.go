package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/utils/gotpl"
	"sigs.k8s.io/kwok/pkg/utils/lifecycle"
)

const exitAnnotation = "custom-scheduler.io/playground-exit"

// TestKwokPodStages loads the playground's kwok configuration as kwok does and checks which pod stage
// each kind of pod gets: bound pods start, deleted pods go, and only an exit annotation that the pod's
// restartPolicy allows ends a running pod.
func TestKwokPodStages(t *testing.T) {
	lc := podLifecycle(t)
	cases := []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"a bound pod starts", testPod(corev1.PodPending, corev1.RestartPolicyNever, ""), []string{"pod-ready"}},
		{"a running Job pod keeps running", testPod(corev1.PodRunning, corev1.RestartPolicyNever, ""), nil},
		{"fail ends a Never pod", testPod(corev1.PodRunning, corev1.RestartPolicyNever, "fail"), []string{"playground-exit-fail"}},
		{"succeed ends a Never pod", testPod(corev1.PodRunning, corev1.RestartPolicyNever, "succeed"), []string{"playground-exit-succeed"}},
		{"succeed ends an OnFailure pod", testPod(corev1.PodRunning, corev1.RestartPolicyOnFailure, "succeed"), []string{"playground-exit-succeed"}},
		{"fail leaves an OnFailure pod running (a kubelet restarts its containers)", testPod(corev1.PodRunning, corev1.RestartPolicyOnFailure, "fail"), nil},
		{"an Always pod never ends", testPod(corev1.PodRunning, corev1.RestartPolicyAlways, "succeed"), nil},
		{"an unknown value does nothing", testPod(corev1.PodRunning, corev1.RestartPolicyNever, "crash"), nil},
		{"a finished pod stays finished", testPod(corev1.PodFailed, corev1.RestartPolicyNever, "fail"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := matchingStages(t, lc, tc.pod); !slices.Equal(got, tc.want) {
				t.Errorf("stages %v, want %v", got, tc.want)
			}
		})
	}

	deleted := testPod(corev1.PodRunning, corev1.RestartPolicyNever, "fail")
	deleted.DeletionTimestamp = ptr.To(metav1.Now())
	if got := matchingStages(t, lc, deleted); !slices.Equal(got, []string{"pod-delete"}) {
		t.Errorf("a deleted pod gets stages %v, want [pod-delete]", got)
	}

	for value, want := range map[string]struct {
		phase    corev1.PodPhase
		exitCode int32
	}{"fail": {corev1.PodFailed, 1}, "succeed": {corev1.PodSucceeded, 0}} {
		status := exitStatus(t, lc, testPod(corev1.PodRunning, corev1.RestartPolicyNever, value))
		if status.Phase != want.phase || len(status.ContainerStatuses) != 2 {
			t.Fatalf("%s: status %+v, want phase %s for both containers", value, status, want.phase)
		}
		for _, cs := range status.ContainerStatuses {
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != want.exitCode {
				t.Errorf("%s: container %s state %+v, want exit code %d", value, cs.Name, cs.State, want.exitCode)
			}
		}
	}
}

func podLifecycle(t *testing.T) lifecycle.Lifecycle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := os.WriteFile(path, []byte(kwokConfiguration()), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := config.Load(context.Background(), path)
	if err != nil {
		t.Fatalf("kwok cannot load the configuration: %v", err)
	}
	var podStages []*internalversion.Stage
	for _, s := range config.FilterWithType[*internalversion.Stage](objs) {
		if s.Spec.ResourceRef.Kind == "Pod" {
			podStages = append(podStages, s)
		}
	}
	lc, err := lifecycle.NewLifecycle(podStages)
	if err != nil {
		t.Fatal(err)
	}
	return lc
}

// testPod is a Job's pod bound to a kwok node, with two containers and the exit annotation if set.
func testPod(phase corev1.PodPhase, restart corev1.RestartPolicy, exit string) *corev1.Pod {
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "worker", Namespace: "demo",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "training", UID: "1"}},
		},
		Spec: corev1.PodSpec{
			NodeName:      "kwok-node-0",
			RestartPolicy: restart,
			Containers:    []corev1.Container{{Name: "a", Image: "pause"}, {Name: "b", Image: "pause"}},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
	if exit != "" {
		pod.Annotations = map[string]string{exitAnnotation: exit}
	}
	return pod
}

func podEvent(pod *corev1.Pod) *lifecycle.Event {
	return &lifecycle.Event{Labels: pod.Labels, Annotations: pod.Annotations, Data: pod}
}

func matchingStages(t *testing.T, lc lifecycle.Lifecycle, pod *corev1.Pod) []string {
	t.Helper()
	stages, err := lc.ListAllPossible(context.Background(), podEvent(pod))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range stages {
		names = append(names, s.Name())
	}
	return names
}

// exitStatus renders the status patch of the one stage that matches the pod.
func exitStatus(t *testing.T, lc lifecycle.Lifecycle, pod *corev1.Pod) corev1.PodStatus {
	t.Helper()
	stages, err := lc.ListAllPossible(context.Background(), podEvent(pod))
	if err != nil || len(stages) != 1 {
		t.Fatalf("stages %v (%v), want one", stages, err)
	}
	renderer := gotpl.NewRenderer(gotpl.FuncMap{"Now": func() string { return "2026-01-02T15:04:05Z" }})
	var status corev1.PodStatus
	_, err = stages[0].DoSteps(0, nil, pod, renderer, nil, nil,
		func(patch *lifecycle.Patch) error {
			var body struct {
				Status corev1.PodStatus `json:"status"`
			}
			if err := json.Unmarshal(patch.Data, &body); err != nil {
				return err
			}
			status = body.Status
			return nil
		}, nil)
	if err != nil {
		t.Fatalf("stage %s: %v", stages[0].Name(), err)
	}
	return status
}
