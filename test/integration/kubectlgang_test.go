package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/gangctl"
	"github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of TestKubectlGang")

// kubectlGang runs kubectl gang in process with args, reading the cluster through the admin
// kubeconfig as kubectl would (--kubeconfig); it returns the output and the error.
func kubectlGang(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := gangctl.NewCommand(&out, time.Now, nil)
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// ages matches what changes from run to run in kubectl gang's output: ages ("5s", "2m10s",
// "<invalid>") and the test namespace.
var ages = regexp.MustCompile(`\b(\d+(s|m|h|d))+\b|<invalid>`)

// cells matches the padding between a table's cells.
var cells = regexp.MustCompile(` {2,}`)

func normalize(out, ns string) string {
	out = strings.ReplaceAll(out, ns, "NS")
	var b strings.Builder
	last := 0
	for _, m := range ages.FindAllStringIndex(out, -1) {
		if strings.HasSuffix(out[:m[0]], "cpu ") { // millicores, not an age
			continue
		}
		b.WriteString(out[last:m[0]])
		b.WriteString("AGE")
		last = m[1]
	}
	b.WriteString(out[last:])
	// An end (a back-off's, a reservation's) is a time, and lies ahead or behind by the time it is read.
	return relativeAge.ReplaceAllString(timestamps.ReplaceAllString(b.String(), "TIME"), "(WHEN)")
}

var (
	timestamps  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	relativeAge = regexp.MustCompile(`\(in AGE\)|\(AGE ago\)`)
)

// withoutEvents drops explain's events section: which events a gang has (one FailedScheduling per
// member attempt) depends on timing; they are checked by field instead.
func withoutEvents(out string) string {
	if i := strings.Index(out, "Events ("); i >= 0 {
		return out[:i]
	}
	return out
}

// golden compares got with testdata/kubectl-gang/<name>, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "kubectl-gang", name)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the golden file (go test -run TestKubectlGang -update writes it): %v", err)
	}
	if got != string(want) {
		t.Errorf("kubectl gang output differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// explainWhen runs explain until the gang says reason (the state flips in some cases, e.g. a gang
// timing out and trying again) and returns its output and its -o json summary from the same state.
func explainWhen(t *testing.T, ns, name, reason string) (string, gangctl.Summary) {
	t.Helper()
	return explainUntil(t, ns, name, reason, func(s gangctl.Summary) bool { return s.Reason == reason })
}

// explainUntil is explainWhen for any state: until holds of the summary, and the text says what.
func explainUntil(t *testing.T, ns, name, what string, until func(gangctl.Summary) bool) (string, gangctl.Summary) {
	t.Helper()
	reason := what
	var out string
	var s gangctl.Summary
	waitFor(t, ns, fmt.Sprintf("kubectl gang explain %s says %s", name, reason), func(context.Context) (bool, error) {
		s = gangctl.Summary{}
		js, err := kubectlGang(t, adminKubeconfig, "explain", name, "-n", ns, "-o", "json")
		if err != nil {
			return false, err
		}
		if err := json.Unmarshal([]byte(js), &s); err != nil {
			return false, err
		}
		if !until(s) {
			return false, nil
		}
		if out, err = kubectlGang(t, adminKubeconfig, "explain", name, "-n", ns); err != nil {
			return false, err
		}
		// The text must be of the same state as the JSON.
		return strings.Contains(out, reason), nil
	})
	return normalize(out, ns), s
}

// kgPod is a member of group on this case's nodes only (so the numbers are of its nodes).
func kgPod(ns, name, group, cpu, nodes string) *v1.Pod {
	p := gangPod(ns, name, group, cpu)
	p.Spec.NodeSelector = map[string]string{caseLabel: nodes}
	return p
}

// kgNodes creates n nodes named <prefix>-<i> with cpu CPUs, labelled for kgPod, and labels(i).
func kgNodes(t *testing.T, prefix string, n int, cpu string, labels func(i int) map[string]string) {
	t.Helper()
	for i := range n {
		l := map[string]string{caseLabel: prefix}
		if labels != nil {
			for k, v := range labels(i) {
				l[k] = v
			}
		}
		createNode(t, fmt.Sprintf("%s-%d", prefix, i), cpu, "8Gi", l)
	}
}

// TestKubectlGang runs kubectl gang against the real scheduler's gangs, one golden output per state
// the scheduler produces (events aside, checked by field), with -o json checked by field.
func TestKubectlGang(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))

	t.Run("waiting for members", func(t *testing.T) {
		ns := testNamespace(t)
		createPodGroup(t, ns, "partial", 3, 0)
		createPod(t, kgPod(ns, "partial-0", "partial", "1", "none"))
		waitForPodGroupCondition(t, ns, "partial", podgroup.ReasonWaitingForMembers)
		out, s := explainWhen(t, ns, "partial", podgroup.ReasonWaitingForMembers)
		golden(t, "waiting-for-members.txt", withoutEvents(out))
		if s.WaitingFor != gangctl.WaitsForMembers || s.Live != 1 || s.MinMember != 3 || s.Shortfall != nil {
			t.Errorf("summary %+v", s)
		}
		get, err := kubectlGang(t, adminKubeconfig, "get", "-n", ns)
		if err != nil {
			t.Fatal(err)
		}
		// A table's padding follows its ages' widths: cells are compared, not the padding.
		golden(t, "get-waiting-for-members.txt", cells.ReplaceAllString(normalize(get, ns), " | "))
	})

	t.Run("infeasible, with numbers", func(t *testing.T) {
		ns := testNamespace(t)
		kgNodes(t, "kgbig", 2, "8", nil)
		createPodGroup(t, ns, "too-big", 2, 0)
		for i := range 2 {
			createPod(t, kgPod(ns, fmt.Sprintf("too-big-%d", i), "too-big", "12", "kgbig"))
		}
		out, s := explainWhen(t, ns, "too-big", podgroup.ReasonGangInfeasible)
		golden(t, "infeasible.txt", withoutEvents(out))
		if s.WaitingFor != gangctl.WaitsForRoom || s.Shortfall == nil || s.Shortfall.Needed != 2 || s.Shortfall.Placeable != 0 ||
			len(s.Unblock) == 0 || s.Unblock[0] != "needs 12 cpu on one node; the largest free has 8" {
			t.Errorf("summary %+v, shortfall %+v", s, s.Shortfall)
		}
		waitForGangEvent(t, ns, "too-big", "PodGroup/too-big", podgroup.ReasonGangInfeasible)
		consistentlyNoneBound(t, time.Second, ns, "too-big")
	})

	t.Run("infeasible in every domain of a required policy", func(t *testing.T) {
		ns := testNamespace(t)
		kgNodes(t, "kgrack", 4, "4", func(i int) map[string]string { return map[string]string{rackLabel: fmt.Sprintf("rack-%d", i/2)} })
		createTopologyPodGroup(t, ns, "racked", 3, map[string]any{"required": rackLabel})
		for i := range 3 {
			createPod(t, kgPod(ns, fmt.Sprintf("racked-%d", i), "racked", "3", "kgrack"))
		}
		out, s := explainWhen(t, ns, "racked", podgroup.ReasonGangInfeasible)
		golden(t, "infeasible-every-domain.txt", withoutEvents(out))
		sf := s.Shortfall
		if sf == nil || sf.Reason != v1alpha1.ShortfallTopologyDomain || sf.TopologyKey != rackLabel || len(sf.Domains) != 2 || sf.Domains[0].Placeable != 2 {
			t.Errorf("shortfall %+v", sf)
		}
		consistentlyNoneBound(t, time.Second, ns, "racked")
	})

	t.Run("bound, then finished", func(t *testing.T) {
		ns := testNamespace(t)
		kgNodes(t, "kgfit", 2, "4", nil)
		watchNotPartial(t, ns, "fits", 2)
		createPodGroup(t, ns, "fits", 2, 0)
		for i := range 2 {
			createPod(t, kgPod(ns, fmt.Sprintf("fits-%d", i), "fits", "2", "kgfit"))
		}
		waitForBoundMembers(t, ns, "fits", 2)
		out, s := explainWhen(t, ns, "fits", podgroup.ReasonQuorumReached)
		// Which member went to which node is the scheduler's choice: the golden file names none.
		golden(t, "bound.txt", regexp.MustCompile(`kgfit-\d`).ReplaceAllString(withoutEvents(out), "NODE"))
		if s.WaitingFor != gangctl.WaitsForNothing || s.Bound != 2 || s.Phase != v1alpha1.PodGroupScheduled {
			t.Errorf("summary %+v", s)
		}
		for i := range 2 {
			pod, err := client.CoreV1().Pods(ns).Get(context.Background(), fmt.Sprintf("fits-%d", i), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pod.Status.Phase = v1.PodSucceeded
			if _, err := client.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, ns, "the gang finished", func(context.Context) (bool, error) {
			return getPodGroup(t, ns, "fits").Status.Phase == v1alpha1.PodGroupFinished, nil
		})
		out, s = explainWhen(t, ns, "fits", podgroup.ReasonQuorumReached)
		golden(t, "finished.txt", regexp.MustCompile(`kgfit-\d`).ReplaceAllString(withoutEvents(out), "NODE"))
		if s.Short != "finished" || s.Finished != 2 || s.Live != 0 {
			t.Errorf("summary %+v", s)
		}
	})

	t.Run("timed out", func(t *testing.T) {
		ns := testNamespace(t)
		kgNodes(t, "kgslow", 2, "4", nil)
		createPodGroup(t, ns, "slow", 2, 2)
		createPod(t, kgPod(ns, "slow-0", "slow", "1", "kgslow"))
		held := kgPod(ns, "slow-1", "slow", "1", "kgslow")
		hold(held)
		createPod(t, held)
		out, s := explainWhen(t, ns, "slow", podgroup.ReasonGangTimedOut)
		golden(t, "timed-out.txt", withoutEvents(out))
		if s.WaitingFor != gangctl.WaitsForBackoff || s.Bound != 0 {
			t.Errorf("summary %+v", s)
		}
		waitForGangEvent(t, ns, "slow", "Pod/slow-1", podgroup.ReasonInvalidTopologyPolicy)
	})

	t.Run("preempting", func(t *testing.T) {
		ensurePriorityClasses(t)
		ns := testNamespace(t)
		smallNodes(t, "kgpre", 2, nil)
		for i := range 2 {
			createPod(t, prioPod(ns, fmt.Sprintf("low-%d", i), "", "2", lowPriority, "kgpre", ""))
		}
		for i := range 2 {
			waitForPodBound(t, ns, fmt.Sprintf("low-%d", i))
		}
		watchNotPartial(t, ns, "urgent", 2)
		createPodGroup(t, ns, "urgent", 2, 0)
		for i := range 2 {
			createPod(t, prioPod(ns, fmt.Sprintf("urgent-%d", i), "urgent", "2", highPriority, "kgpre", ""))
		}
		// No kubelet confirms the victims' end: the gang stays Preempting while they terminate.
		out, s := explainWhen(t, ns, "urgent", podgroup.ReasonPreempting)
		golden(t, "preempting.txt", regexp.MustCompile(`kgpre-\d`).ReplaceAllString(withoutEvents(out), "NODE"))
		if s.WaitingFor != gangctl.WaitsForPreemption || s.Bound != 0 {
			t.Errorf("summary %+v", s)
		}
		waitForGangEvent(t, ns, "urgent", "PodGroup/urgent", podgroup.ReasonPreempting)
	})

	t.Run("backing off after a rejected attempt", func(t *testing.T) {
		ns := testNamespace(t)
		kgNodes(t, "kgport", 1, "4", nil)
		createPodGroup(t, ns, "ports", 2, 0)
		for i := range 2 {
			// Both want host port 8080 on the one node: the whole-gang check (which does not model
			// host ports) lets the attempt start, and the second member finds no node.
			p := kgPod(ns, fmt.Sprintf("ports-%d", i), "ports", "1", "kgport")
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
			createPod(t, p)
		}
		out, s := explainWhen(t, ns, "ports", podgroup.ReasonGangRejected)
		// Which member the attempt found no node for, and which one is nominated, alternate from one
		// attempt to the next (the one that failed goes first the next time).
		out = regexp.MustCompile(`member NS/ports-\d`).ReplaceAllString(out, "member NS/ports-N")
		out = strings.ReplaceAll(out, "  nominated to kgport-0", "")
		golden(t, "backing-off.txt", withoutEvents(out))
		if s.WaitingFor != gangctl.WaitsForBackoff || s.Bound != 0 {
			t.Errorf("summary %+v", s)
		}
		consistentlyNoneBound(t, time.Second, ns, "ports")
	})

	t.Run("every namespace, and rights the user lacks", func(t *testing.T) {
		out, err := kubectlGang(t, adminKubeconfig, "get", "-A", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var list struct{ Items []gangctl.Summary }
		if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Items) == 0 {
			t.Fatalf("get -A -o json: %v\n%s", err, out)
		}
		nobody, err := writeKubeconfig(scratchDir, "kubectl-gang-nobody", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = kubectlGang(t, nobody, "get", "-n", "default")
		if err == nil || !strings.Contains(err.Error(), "not allowed to read PodGroups in namespace default: kubectl gang needs get and list") {
			t.Errorf("a user without rights: error %v", err)
		}
		_, err = kubectlGang(t, adminKubeconfig, "explain", "absent", "-n", "default")
		if err == nil || err.Error() != `PodGroup "absent" not found in namespace default` {
			t.Errorf("an absent gang: error %v", err)
		}
	})
}

// waitForGangEvent waits until kubectl gang explain lists the event (the recorder writes events
// in the background, after the status may already say so).
func waitForGangEvent(t *testing.T, ns, name, object, reason string) {
	t.Helper()
	waitFor(t, ns, fmt.Sprintf("kubectl gang explain %s lists %s's %s event", name, object, reason), func(context.Context) (bool, error) {
		js, err := kubectlGang(t, adminKubeconfig, "explain", name, "-n", ns, "-o", "json")
		if err != nil {
			return false, err
		}
		var s gangctl.Summary
		if err := json.Unmarshal([]byte(js), &s); err != nil {
			return false, err
		}
		return hasEvent(s, object, reason), nil
	})
}

func hasEvent(s gangctl.Summary, object, reason string) bool {
	for _, e := range s.Events {
		if e.Object == object && e.Reason == reason {
			return true
		}
	}
	return false
}

// TestKubectlGangReserved: a gang holding a reservation, as kubectl gang shows it (the shipped
// profile, with reservation.afterSeconds 2).
func TestKubectlGangReserved(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, fastReservation(t, "30")))
	ns := testNamespace(t)
	smallNodes(t, "kgres", 2, nil)
	// Small pods that come and go keep the gang from ever fitting at once, until it reserves.
	startStream(t, ns, "kgres", "1", "", 300*time.Millisecond, 3*time.Second)
	time.Sleep(2 * time.Second)
	watchNotPartial(t, ns, "held", 4)
	createPodGroup(t, ns, "held", 4, 0)
	for i := range 4 {
		createPod(t, kgPod(ns, fmt.Sprintf("held-%d", i), "held", "1", "kgres"))
	}
	out, s := explainUntil(t, ns, "held", "holds room", func(s gangctl.Summary) bool { return s.WaitingFor == gangctl.WaitsForReservation })
	// What the stream holds at that moment varies, so the lines with its numbers (why, the shortfall)
	// are left out; the reservation's own are kept.
	var kept []string
	for _, line := range strings.Split(withoutEvents(out), "\n") {
		for _, head := range []string{"PodGroup ", "Quorum:", "Reserved:", "Members", "  held-"} {
			if strings.HasPrefix(line, head) {
				kept = append(kept, regexp.MustCompile(`kgres-\d`).ReplaceAllString(line, "NODE"))
			}
		}
	}
	golden(t, "reserved.txt", strings.Join(kept, "\n")+"\n")
	if s.Reservation == nil || !s.Reservation.Status || s.Reservation.Reason != podgroup.ReasonRoomHeld || s.Bound != 0 {
		t.Errorf("summary %+v, reservation %+v", s, s.Reservation)
	}
	waitForGangEvent(t, ns, "held", "PodGroup/held", podgroup.ReasonReserved)
	waitForBoundMembers(t, ns, "held", 4)
	out, s = explainWhen(t, ns, "held", podgroup.ReasonQuorumReached)
	if s.Reservation == nil || s.Reservation.Status || !strings.Contains(out, "Reserved: no; the last reservation ended") {
		t.Errorf("after binding, reservation %+v:\n%s", s.Reservation, out)
	}
}

// kubectlGangBackground runs kubectl gang with args in the background, as a user runs a watch until
// Ctrl-C: it returns the output so far, the command's end (its error) and the Ctrl-C (cancel).
func kubectlGangBackground(t *testing.T, args ...string) (*lockedBuffer, <-chan error, context.CancelFunc) {
	t.Helper()
	out := &lockedBuffer{}
	cmd := gangctl.NewCommand(out, time.Now, nil)
	cmd.SetArgs(append([]string{"--kubeconfig", adminKubeconfig}, args...))
	cmd.SetErr(&bytes.Buffer{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(cancel)
	return out, done, cancel
}

// jsonStream decodes a stream of JSON objects (what get -w -o json prints), up to the first that is
// not whole yet.
func jsonStream(out string) []gangctl.Summary {
	var objs []gangctl.Summary
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var s gangctl.Summary
		if err := dec.Decode(&s); err != nil {
			return objs
		}
		objs = append(objs, s)
	}
}

// yamlStream decodes a stream of YAML documents separated by "---" (what get -w -o yaml prints).
func yamlStream(out string) []gangctl.Summary {
	var objs []gangctl.Summary
	for _, doc := range strings.Split(out, "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var s gangctl.Summary
		if err := sigsyaml.Unmarshal([]byte(doc), &s); err != nil {
			return objs
		}
		objs = append(objs, s)
	}
	return objs
}

// waitForStream waits until the objects a watch printed satisfy cond; it fails at once if the watch
// ended (kubectl get -w ends only when asked to).
func waitForStream(t *testing.T, ns, what string, out *lockedBuffer, done <-chan error, decode func(string) []gangctl.Summary, cond func([]gangctl.Summary) bool) {
	t.Helper()
	waitFor(t, ns, what, func(context.Context) (bool, error) {
		if cond(decode(out.String())) {
			return true, nil
		}
		select {
		case err := <-done:
			return false, fmt.Errorf("the watch ended (error %v) before %s; it printed:\n%s", err, what, out.String())
		default:
			return false, nil
		}
	})
}

// TestKubectlGangWatchOutput: get -w -o json and -o yaml print a stream of objects, one per change
// of the PodGroup, as kubectl get -w -o json does, until the user stops them: the gang's first state,
// its placement, its deletion.
func TestKubectlGangWatchOutput(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))
	ns := testNamespace(t)
	kgNodes(t, "kgwatch", 2, "4", nil)
	watchWhole(t, ns, "streamed", 2, nil)
	createPodGroup(t, ns, "streamed", 2, 0)
	jsonOut, jsonDone, stopJSON := kubectlGangBackground(t, "get", "-n", ns, "-w", "-o", "json")
	yamlOut, yamlDone, stopYAML := kubectlGangBackground(t, "get", "streamed", "-n", ns, "-w", "-o", "yaml")
	first := func(objs []gangctl.Summary) bool { return len(objs) > 0 && objs[0].Name == "streamed" }
	waitForStream(t, ns, "get -w -o json prints the gang", jsonOut, jsonDone, jsonStream, first)
	waitForStream(t, ns, "get -w -o yaml prints the gang", yamlOut, yamlDone, yamlStream, first)

	for i := range 2 {
		createPod(t, kgPod(ns, fmt.Sprintf("streamed-%d", i), "streamed", "2", "kgwatch"))
	}
	waitForBoundMembers(t, ns, "streamed", 2)
	placed := func(objs []gangctl.Summary) bool {
		return len(objs) > 1 && objs[len(objs)-1].WaitingFor == gangctl.WaitsForNothing && objs[len(objs)-1].Bound == 2
	}
	waitForStream(t, ns, "get -w -o json prints the gang placed", jsonOut, jsonDone, jsonStream, placed)
	waitForStream(t, ns, "get -w -o yaml prints the gang placed", yamlOut, yamlDone, yamlStream, placed)

	if err := dynamicClient(t).Resource(podGroupGVR).Namespace(ns).Delete(context.Background(), "streamed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := func(objs []gangctl.Summary) bool { return len(objs) > 2 && objs[len(objs)-1].Short == "deleted" }
	waitForStream(t, ns, "get -w -o json prints the gang deleted", jsonOut, jsonDone, jsonStream, deleted)
	waitForStream(t, ns, "get -w -o yaml prints the gang deleted", yamlOut, yamlDone, yamlStream, deleted)
	for _, s := range jsonStream(jsonOut.String()) {
		if s.Namespace != ns || s.Name != "streamed" {
			t.Errorf("get -w -o json printed %s/%s", s.Namespace, s.Name)
		}
	}
	stopJSON()
	stopYAML()
	for what, done := range map[string]<-chan error{"json": jsonDone, "yaml": yamlDone} {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("get -w -o %s ended with %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("get -w -o %s did not stop when asked to", what)
		}
	}
}

// recordingConnect is kubectl gang's connection as the admin, recording what the events it read
// cost: each events request's query, and how many events the apiserver sent.
type eventReads struct {
	mu      sync.Mutex
	queries []string
	events  int
	bytes   int
}

type recordingTransport struct {
	next  http.RoundTripper
	reads *eventReads
}

func (rt recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.next.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/events") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	n := 0
	if obj, _, err := clientscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil); err == nil {
		if list, ok := obj.(*v1.EventList); ok {
			n = len(list.Items)
		}
	}
	rt.reads.mu.Lock()
	defer rt.reads.mu.Unlock()
	rt.reads.queries = append(rt.reads.queries, req.URL.RawQuery)
	rt.reads.events += n
	rt.reads.bytes += len(body)
	return resp, nil
}

func recordingConnect(ns string, reads *eventReads) gangctl.Connect {
	return func(*genericclioptions.ConfigFlags) (gangctl.Clients, string, error) {
		cfg := rest.CopyConfig(restConfig)
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return recordingTransport{next: rt, reads: reads} }
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return gangctl.Clients{}, "", err
		}
		pgs, err := versioned.NewForConfig(cfg)
		if err != nil {
			return gangctl.Clients{}, "", err
		}
		return gangctl.Clients{Kube: kube, PodGroups: pgs}, ns, nil
	}
}

// TestKubectlGangEventsByUID: explain reads the events of the gang's PodGroup and members only,
// selected by their uids at the apiserver, not every event of the namespace; and it still lists
// them all (the PodGroup's, its members').
func TestKubectlGangEventsByUID(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))
	ns := testNamespace(t)
	kgNodes(t, "kgev", 2, "8", nil)
	watchWhole(t, ns, "too-big", 2, nil)
	createPodGroup(t, ns, "too-big", 2, 0)
	for i := range 2 {
		createPod(t, kgPod(ns, fmt.Sprintf("too-big-%d", i), "too-big", "12", "kgev"))
	}
	// The rest of a busy namespace: events of other objects, one of them named like the gang (a
	// PodGroup of that name deleted before: another uid).
	const noise = 400
	for i := range noise {
		obj := v1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: fmt.Sprintf("noise-%d", i), UID: types.UID(fmt.Sprintf("noise-uid-%d", i))}
		if i == 0 {
			obj = v1.ObjectReference{Kind: "PodGroup", APIVersion: v1alpha1.SchemeGroupVersion.String(), Namespace: ns, Name: "too-big", UID: "an-older-too-big"}
		}
		ev := &v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("noise-%d", i)}, InvolvedObject: obj,
			Type: v1.EventTypeNormal, Reason: "Noise", Message: strings.Repeat("unrelated ", 20), Source: v1.EventSource{Component: "test"},
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1}
		if _, err := client.CoreV1().Events(ns).Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitForGangEvent(t, ns, "too-big", "PodGroup/too-big", podgroup.ReasonGangInfeasible)
	waitForGangEvent(t, ns, "too-big", "Pod/too-big-0", "FailedScheduling")

	reads := &eventReads{}
	var out bytes.Buffer
	cmd := gangctl.NewCommand(&out, time.Now, recordingConnect(ns, reads))
	cmd.SetArgs([]string{"explain", "too-big", "-o", "json"})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	var s gangctl.Summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if !hasEvent(s, "PodGroup/too-big", podgroup.ReasonGangInfeasible) || !hasEvent(s, "Pod/too-big-0", "FailedScheduling") || !hasEvent(s, "Pod/too-big-1", "FailedScheduling") {
		t.Errorf("explain's events lack the gang's or a member's: %+v", s.Events)
	}
	for _, e := range s.Events {
		if e.Reason == "Noise" {
			t.Errorf("explain lists an event of another object: %+v", e)
		}
	}
	reads.mu.Lock()
	defer reads.mu.Unlock()
	t.Logf("explain read %d events (%d bytes) in %d requests: %q", reads.events, reads.bytes, len(reads.queries), reads.queries)
	for _, q := range reads.queries {
		if !strings.Contains(q, "involvedObject.uid") {
			t.Errorf("explain read events without selecting them by uid: ?%s", q)
		}
	}
	if reads.events >= noise {
		t.Errorf("explain read %d events of the namespace, of which %d are the gang's", reads.events, len(s.Events))
	}
}

// TestKubectlGangOtherScheduler: a gang whose pods name a scheduler that none of ours is (kubectl
// gang's --scheduler-name, custom-scheduler by default) does not wait for members: kubectl gang says
// that no scheduler of ours serves them, naming theirs and ours; a gang some of whose pods are ours
// but too few for its quorum says how many are not.
func TestKubectlGangOtherScheduler(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, coschedulingProfiles))
	ns := testNamespace(t)
	kgNodes(t, "kgother", 2, "4", nil)
	watchWhole(t, ns, "elsewhere", 3, nil)
	watchWhole(t, ns, "mixed", 3, nil)
	createPodGroup(t, ns, "elsewhere", 3, 0)
	createPodGroup(t, ns, "mixed", 3, 0)
	for i := range 3 {
		// No default scheduler runs here: these stay pending, as a gang does whose pods name a
		// scheduler the cluster lacks.
		p := kgPod(ns, fmt.Sprintf("elsewhere-%d", i), "elsewhere", "1", "kgother")
		p.Spec.SchedulerName = v1.DefaultSchedulerName
		createPod(t, p)
	}
	createPod(t, kgPod(ns, "mixed-0", "mixed", "1", "kgother"))
	for i := 1; i < 3; i++ {
		p := kgPod(ns, fmt.Sprintf("mixed-%d", i), "mixed", "1", "kgother")
		p.Spec.SchedulerName = "volcano"
		createPod(t, p)
	}
	waitForPodGroupCondition(t, ns, "mixed", podgroup.ReasonWaitingForMembers)

	out, s := explainUntil(t, ns, "elsewhere", "PodGroup", func(s gangctl.Summary) bool { return len(s.Members) == 3 })
	if s.WaitingFor != "Scheduler" || !strings.Contains(s.Short, "default-scheduler") || !strings.Contains(s.Short, "custom-scheduler") {
		t.Errorf("a gang of another scheduler's pods: waiting for %q (%q)", s.WaitingFor, s.Short)
	}
	mixed, ms := explainWhen(t, ns, "mixed", podgroup.ReasonWaitingForMembers)
	// Its counts are of its members, as the scheduler's status counts them: the one pod of ours.
	if ms.WaitingFor != "Scheduler" || !strings.Contains(ms.Short, "volcano") || ms.Live != 1 || len(ms.Members) != 3 {
		t.Errorf("a gang of 1 pod of ours and 2 of volcano's: waiting for %q (%q), live %d of %d pods", ms.WaitingFor, ms.Short, ms.Live, len(ms.Members))
	}
	golden(t, "other-scheduler.txt", withoutEvents(out))
	golden(t, "mixed-schedulers.txt", withoutEvents(mixed))
	get, err := kubectlGang(t, adminKubeconfig, "get", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "get-other-scheduler.txt", cells.ReplaceAllString(normalize(get, ns), " | "))
	// Told that volcano is ours too, the mixed gang is served; the other still is not.
	js, err := kubectlGang(t, adminKubeconfig, "get", "-n", ns, "-o", "json", "--scheduler-name", "custom-scheduler,volcano")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Items []gangctl.Summary }
	if err := json.Unmarshal([]byte(js), &list); err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Items {
		if want := map[string]string{"elsewhere": "Scheduler", "mixed": gangctl.WaitsForMembers}[it.Name]; it.WaitingFor != want {
			t.Errorf("with --scheduler-name custom-scheduler,volcano: %s waits for %q (%q), want %q", it.Name, it.WaitingFor, it.Short, want)
		}
	}
	consistentlyNoneBound(t, time.Second, ns, "elsewhere", "mixed")
}

// TestKubectlGangDevices: a GPU gang (a DRA-backed extended resource) short of devices, as explain
// says it: in devices of a class for a number of members, not as the check's dimension's name.
func TestKubectlGangDevices(t *testing.T) {
	startScheduler(t, schedulerConfig(t, adminKubeconfig, shippedProfiles(t)))

	t.Run("too few devices", func(t *testing.T) {
		ns := testNamespace(t)
		e := newDRAEnv(t, ns, true)
		for i := range 3 {
			e.node(t, fmt.Sprintf("%s-%d", ns, i), "8", "gang", 1, nil)
		}
		watchWhole(t, ns, "train", 4, nil)
		createPodGroup(t, ns, "train", 4, 0)
		for i := range 4 {
			createPod(t, e.extPod(fmt.Sprintf("train-%d", i), "train", "1", "gang"))
		}
		out, s := explainWhen(t, ns, "train", podgroup.ReasonGangInfeasible)
		t.Logf("explain:\n%s", withoutEvents(out))
		want := "needs devices of class gpu-NS.example.com for 4 members; the free ones hold 3"
		if !slices.Contains(s.Unblock, strings.ReplaceAll(want, "NS", ns)) || !strings.Contains(out, want) {
			t.Errorf("unblock %q, want %q", s.Unblock, want)
		}
		if strings.Contains(strings.Join(s.Unblock, "\n"), "devices/") {
			t.Errorf("unblock names the check's dimension: %q", s.Unblock)
		}
		consistentlyNoneBound(t, time.Second, ns, "train")
	})

	t.Run("a required rack short of devices", func(t *testing.T) {
		ns := testNamespace(t)
		e := newDRAEnv(t, ns, true)
		for i := range 5 {
			rack := ns + "-a"
			if i >= 2 {
				rack = ns + "-b"
			}
			e.node(t, fmt.Sprintf("%s-%d", ns, i), "8", "gang", 1, map[string]string{rackLabel: rack})
		}
		watchWhole(t, ns, "train", 4, nil)
		watchOneDomain(t, ns, "train", rackLabel)
		createTopologyPodGroup(t, ns, "train", 4, map[string]any{"required": rackLabel})
		for i := range 4 {
			createPod(t, e.extPod(fmt.Sprintf("train-%d", i), "train", "1", "gang"))
		}
		out, s := explainWhen(t, ns, "train", podgroup.ReasonGangInfeasible)
		t.Logf("explain:\n%s", withoutEvents(out))
		want := "needs 4 members, with their devices of class gpu-NS.example.com, in one example.com/rack domain; the roomiest, example.com/rack=NS-b, fits 3"
		if len(s.Unblock) == 0 || s.Unblock[0] != strings.ReplaceAll(want, "NS", ns) || !strings.Contains(out, want) {
			t.Errorf("unblock %q, want %q first", s.Unblock, want)
		}
		consistentlyNoneBound(t, time.Second, ns, "train")
	})
}
