package gangctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

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

// TestWatchObjects: get --watch -o json|yaml prints each gang as an object of its own (a YAML
// document each, "---" between them), then one object per change of its PodGroup, until its
// context ends; --output-watch-events wraps each in its change's type.
func TestWatchObjects(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		decode func(string) ([]map[string]any, error)
		// first and last: what the first and the last object printed must hold.
		first, last map[string]any
	}{
		{name: "json, every gang of the namespace", args: []string{"get", "-w", "-o", "json"}, decode: decodeJSONStream,
			first: map[string]any{"name": "too-big"}, last: map[string]any{"name": "training", "short": "finished"}},
		{name: "yaml, one gang", args: []string{"get", "training", "-w", "-o", "yaml"}, decode: decodeYAMLStream,
			first: map[string]any{"name": "training", "short": "running"}, last: map[string]any{"name": "training", "short": "finished"}},
		{name: "json, with the changes' types", args: []string{"get", "training", "-w", "-o", "json", "--output-watch-events"}, decode: decodeJSONStream,
			first: map[string]any{"type": "ADDED"}, last: map[string]any{"type": "MODIFIED"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pgObjs, kubeObjs := fixture()
			kube, pgs := kubefake.NewClientset(kubeObjs...), pgfake.NewSimpleClientset(pgObjs...)
			conn := func(*genericclioptions.ConfigFlags) (Clients, string, error) {
				return Clients{Kube: kube, PodGroups: pgs}, "demo", nil
			}
			out := &syncBuffer{}
			cmd := NewCommand(out, func() time.Time { return testNow }, conn)
			cmd.SetArgs(tc.args)
			cmd.SetErr(&bytes.Buffer{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- cmd.ExecuteContext(ctx) }()
			objects := func() []map[string]any {
				objs, err := tc.decode(out.String())
				if err != nil {
					t.Fatalf("%v in:\n%s", err, out.String())
				}
				return objs
			}
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(out.String(), "training") {
				if time.Now().After(deadline) {
					t.Fatalf("nothing printed:\n%s", out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The fake watch starts when the command asks for it: change the PodGroup until an object shows it.
			changed := func() bool {
				objs := objects()
				if len(objs) == 0 {
					return false
				}
				o := objs[len(objs)-1]
				if w, ok := o["object"].(map[string]any); ok {
					o = w
				}
				return o["short"] == "finished"
			}
			for !changed() {
				select {
				case err := <-done:
					t.Fatalf("the watch ended (%v) after printing:\n%s", err, out.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("no change printed:\n%s", out.String())
				}
				pg, err := pgs.SchedulingV1alpha1().PodGroups("demo").Get(ctx, "training", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				pg.Status.Phase = v1alpha1.PodGroupFinished
				if _, err := pgs.SchedulingV1alpha1().PodGroups("demo").UpdateStatus(ctx, pg, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			objs := objects()
			if len(objs) < 2 {
				t.Fatalf("%d objects:\n%s", len(objs), out.String())
			}
			for k, v := range tc.first {
				if objs[0][k] != v {
					t.Errorf("first object's %s = %v, want %v:\n%s", k, objs[0][k], v, out.String())
				}
			}
			for k, v := range tc.last {
				if objs[len(objs)-1][k] != v {
					t.Errorf("last object's %s = %v, want %v:\n%s", k, objs[len(objs)-1][k], v, out.String())
				}
			}
			if _, wrapped := tc.first["type"]; wrapped {
				if o, ok := objs[0]["object"].(map[string]any); !ok || o["name"] != "training" {
					t.Errorf("the change's object = %v", objs[0]["object"])
				}
			}
			if strings.Contains(out.String(), "items") {
				t.Errorf("a watch printed a list:\n%s", out.String())
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
		})
	}
}

func decodeJSONStream(s string) ([]map[string]any, error) {
	var out []map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	for {
		var o map[string]any
		if err := dec.Decode(&o); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
}

func decodeYAMLStream(s string) ([]map[string]any, error) {
	var out []map[string]any
	for i, doc := range strings.Split(s, "---\n") {
		if strings.TrimSpace(doc) == "" {
			return nil, fmt.Errorf("document %d is empty", i)
		}
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}
