package gangctl

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	pgfake "github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned/fake"
)

// syncBuffer is a buffer the command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWatch: get --watch prints the list, then a gang's line again when its PodGroup changes, and
// stops when its context ends.
func TestWatch(t *testing.T) {
	pgObjs, kubeObjs := fixture()
	kube, pgs := kubefake.NewClientset(kubeObjs...), pgfake.NewSimpleClientset(pgObjs...)
	conn := func(*genericclioptions.ConfigFlags) (Clients, string, error) {
		return Clients{Kube: kube, PodGroups: pgs}, "demo", nil
	}
	out := &syncBuffer{}
	cmd := NewCommand(out, func() time.Time { return testNow }, conn)
	cmd.SetArgs([]string{"get", "training", "--watch"})
	cmd.SetErr(&bytes.Buffer{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	waitForOutput := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(out.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the output:\n%s", what, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitForOutput("training  Running")
	pg, err := pgs.SchedulingV1alpha1().PodGroups("demo").Get(ctx, "training", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pg.Status.Phase = v1alpha1.PodGroupFinished
	pg.Status.Conditions = append(pg.Status.Conditions[:0], scheduled(podgroup.ReasonQuorumReached, "done", 0))
	// The fake watch starts when the command asks for it: change the PodGroup until a line shows it.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "Finished") && time.Now().Before(deadline) {
		if _, err := pgs.SchedulingV1alpha1().PodGroups("demo").UpdateStatus(ctx, pg, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		pg, _ = pgs.SchedulingV1alpha1().PodGroups("demo").Get(ctx, "training", metav1.GetOptions{})
		pg.Status.Phase = v1alpha1.PodGroupFinished
	}
	waitForOutput("training  Finished  3     3      0        0      3    10m  finished")
	if strings.Count(out.String(), "NAME") != 1 {
		t.Errorf("the header is printed more than once:\n%s", out.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("watch ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not stop with its context")
	}
}
