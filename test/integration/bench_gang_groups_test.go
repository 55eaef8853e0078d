package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// BenchmarkGangGroupsAgainstInTree is the composite case end to end, against the one thing
// scheduler_perf v1.37.2 cannot run: in-tree's own CompositePodGroup cycle (its apiserver serves no
// scheduling.k8s.io/v1alpha3). Here the envtest apiserver serves it, and the same objects, jobs of
// three roles (8 + 16 + 2 members of 100m) each a gang CompositePodGroup (minGroupCount 3) over three
// gang PodGroups, are placed on 1000 nodes by
//   - InTree: the scheduler binary with the default profile only (upstream's plugins, nothing of
//     ours) and the gates CompositePodGroup, GenericWorkload and TopologyAwareWorkloadScheduling on:
//     kube-scheduler 1.37.2's pod-group cycle over the tree;
//   - Custom: the same binary with the shipped profile, gates off, as the docs tell users to run it.
//
// Each repetition starts the scheduler, waits until it binds a probe pod, then creates the jobs' pods
// role after role (every job's first role, then the second, then the third; the groups exist first)
// and waits until all are bound. It logs pods/s over that span and the scheduler process' CPU (user +
// system, from /proc) per pod for each repetition, the two schedulers interleaved, and reports their
// medians and the ratios ours / in-tree paired by repetition. Run it alone on the machine:
//
//	hack/bench-gang-groups.sh
//
// GANG_GROUPS_BENCH_NODES, _JOBS and _REPS change the size (default 1000 nodes, 100 jobs, 3 repetitions).
func BenchmarkGangGroupsAgainstInTree(b *testing.B) {
	nodes, jobs := benchEnvInt(b, "GANG_GROUPS_BENCH_NODES", 1000), benchEnvInt(b, "GANG_GROUPS_BENCH_JOBS", 100)
	reps := benchEnvInt(b, "GANG_GROUPS_BENCH_REPS", 3)
	cs := fastClient(b)
	createBenchNodes(b, cs, nodes)
	modes := []benchScheduler{
		{name: "InTree", scheduler: "default-scheduler", profiles: "  - schedulerName: default-scheduler\n",
			flags: []string{"--feature-gates=GenericWorkload=true,CompositePodGroup=true,TopologyAwareWorkloadScheduling=true"}},
		{name: "Custom", scheduler: schedulerName, profiles: shippedProfiles(b)},
	}
	b.ResetTimer()
	for range b.N {
		var podsRatio, cpuRatio []float64
		results := map[string][][2]float64{}
		for rep := range reps {
			// Interleaved, the first of each pair alternating, so a drift of the machine weighs on both.
			order := []benchScheduler{modes[rep%2], modes[1-rep%2]}
			for _, m := range order {
				podsPerSec, cpuPerPod := runGangGroupsJobs(b, cs, m, jobs)
				b.Logf("repetition %d, %s: %.1f pods/s, %.2f scheduler CPU-ms per pod", rep+1, m.name, podsPerSec, cpuPerPod)
				results[m.name] = append(results[m.name], [2]float64{podsPerSec, cpuPerPod})
			}
			ours, theirs := results["Custom"][rep], results["InTree"][rep]
			podsRatio = append(podsRatio, ours[0]/theirs[0])
			cpuRatio = append(cpuRatio, ours[1]/theirs[1])
		}
		for _, m := range modes {
			var pods, cpu []float64
			for _, r := range results[m.name] {
				pods, cpu = append(pods, r[0]), append(cpu, r[1])
			}
			b.ReportMetric(median(pods), m.name+"-pods/s")
			b.ReportMetric(median(cpu), m.name+"-CPU-ms/pod")
		}
		b.ReportMetric(median(podsRatio), "ratio-pods/s")
		b.ReportMetric(median(cpuRatio), "ratio-CPU/pod")
		b.Logf("ours / in-tree, paired by repetition: pods/s %s, scheduler CPU per pod %s", spread(podsRatio), spread(cpuRatio))
	}
}

// benchScheduler is one scheduler of the comparison: its profile, the name its pods ask for, flags.
type benchScheduler struct {
	name, scheduler, profiles string
	flags                     []string
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is "median (min–max)".
func spread(xs []float64) string {
	return fmt.Sprintf("%.2f (%.2f–%.2f)", median(xs), slices.Min(xs), slices.Max(xs))
}

// gangGroupsRoles are the roles of one benchmark job and their sizes (each its own gang).
var gangGroupsRoles = []struct {
	name string
	size int
}{{"a", 8}, {"b", 16}, {"c", 2}}

// runGangGroupsJobs places jobs with the scheduler of the given name, started from profiles and
// flags, and returns pods/s and the scheduler's CPU milliseconds per pod.
func runGangGroupsJobs(b *testing.B, cs kubernetes.Interface, m benchScheduler, jobs int) (float64, float64) {
	scheduler := m.scheduler
	ctx := context.Background()
	ns := fmt.Sprintf("gg-bench-%s-%d", strings.ToLower(scheduler[:1]), time.Now().UnixNano()%1e9)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
			b.Errorf("deleting pods of %s: %v", ns, err)
		}
	}()
	proc, log := startSchedulerProcess(b, m)
	defer proc.stop()

	probe := benchPod(ns, "probe", scheduler, "")
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitBound(b, cs, ns, 1, 2*time.Minute, log)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "probe", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		b.Fatal(err)
	}
	total := 0
	for j := range jobs {
		job := fmt.Sprintf("job-%d", j)
		c := inTreeComposite(ns, job, "", int32(len(gangGroupsRoles)))
		if _, err := cs.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			b.Fatalf("creating CompositePodGroup %s: %v", job, err)
		}
		for _, r := range gangGroupsRoles {
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job + "-" + r.name},
				Spec: inTreeChild(int32(r.size), job, r.name)}
			if _, err := cs.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
				b.Fatalf("creating PodGroup %s: %v", pg.Name, err)
			}
			total += r.size
		}
	}
	var pods []*v1.Pod
	for _, r := range gangGroupsRoles {
		for j := range jobs {
			group := fmt.Sprintf("job-%d-%s", j, r.name)
			for i := range r.size {
				pods = append(pods, benchPod(ns, fmt.Sprintf("%s-%d", group, i), scheduler, group))
			}
		}
	}
	cpu0 := proc.cpu(b)
	start := time.Now()
	parallelCreate(b, cs, pods)
	waitBound(b, cs, ns, total, 10*time.Minute, log)
	elapsed := time.Since(start)
	cpu := proc.cpu(b) - cpu0
	return float64(total) / elapsed.Seconds(), float64(cpu.Milliseconds()) / float64(total)
}

// benchPod is a 100m member of the in-tree PodGroup group ("" for none) for the scheduler.
func benchPod(ns, name, scheduler, group string) *v1.Pod {
	p := inTreePod(ns, name, group, "100m")
	p.Spec.SchedulerName = scheduler
	if group == "" {
		p.Spec.SchedulingGroup = nil
	}
	return p
}

// parallelCreate creates the pods in their order, 8 requests in flight.
func parallelCreate(b *testing.B, cs kubernetes.Interface, pods []*v1.Pod) {
	next := make(chan *v1.Pod)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for p := range next {
				if _, err := cs.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- fmt.Errorf("creating pod %s: %w", p.Name, err):
					default:
					}
				}
			}
		})
	}
	for _, p := range pods {
		next <- p
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// waitBound waits until want pods of ns are bound, reading the apiserver's watch cache twice a second.
func waitBound(b *testing.B, cs kubernetes.Interface, ns string, want int, timeout time.Duration, log *lockedBuffer) {
	bound := 0
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		bound = 0
		for i := range list.Items {
			if list.Items[i].Spec.NodeName != "" && list.Items[i].DeletionTimestamp == nil {
				bound++
			}
		}
		return bound >= want, nil
	})
	if err != nil {
		b.Fatalf("%d of %d pods of %s bound after %v: %v\nscheduler log (tail):\n%s", bound, want, ns, timeout, err, tail(log.String(), 60))
	}
}

// schedulerProcess is the scheduler binary running as a child process.
type schedulerProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startSchedulerProcess runs the binary with the scheduler's profiles and flags at -v=1, its output
// in a buffer. Its client is not throttled (scheduler_perf's 5000 QPS): at the default 50 QPS the
// binding calls alone would cap both schedulers at about 25 pods/s.
func startSchedulerProcess(b *testing.B, m benchScheduler) (*schedulerProcess, *lockedBuffer) {
	bin, err := binaryPath()
	if err != nil {
		b.Fatal(err)
	}
	config := filepath.Join(b.TempDir(), "scheduler-config.yaml")
	data := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: 5000
  burst: 5000
leaderElection:
  leaderElect: false
profiles:
%s`, adminKubeconfig, m.profiles)
	if err := os.WriteFile(config, []byte(data), 0o600); err != nil {
		b.Fatal(err)
	}
	out := &lockedBuffer{}
	args := append([]string{"--config=" + config, "--secure-port=0", "-v=1"}, m.flags...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	// The scheduler goes with the benchmark, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting %s for %s: %v", bin, m.name, err)
	}
	p := &schedulerProcess{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, out
}

// cpu is the process' user + system time so far, from /proc/<pid>/stat (clock ticks of 10 ms).
func (p *schedulerProcess) cpu(b *testing.B) time.Duration {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "stat"))
	if err != nil {
		b.Fatalf("reading the scheduler's CPU time: %v", err)
	}
	// The fields after the command's closing parenthesis start at the state (field 3): utime and
	// stime are fields 14 and 15.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("parsing /proc/%d/stat: %v", p.cmd.Process.Pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

func (p *schedulerProcess) stop() { stopProcess(p.cmd, p.exited, 30*time.Second) }

// createBenchNodes creates n ready nodes of 8 CPU and 32Gi, 8 at a time, for the rest of the process.
func createBenchNodes(b *testing.B, cs kubernetes.Interface, n int) {
	names := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for name := range names {
				if _, err := makeReadyNode(context.Background(), cs, name, "8", "32Gi", nil); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		names <- fmt.Sprintf("gg-bench-%04d", i)
	}
	close(names)
	wg.Wait()
}

// fastClient is an admin clientset without client-side throttling, so creating pods measures the
// apiserver and not the client's rate limit.
func fastClient(b *testing.B) kubernetes.Interface {
	cfg := rest.CopyConfig(restConfig)
	cfg.QPS, cfg.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

func benchEnvInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}
