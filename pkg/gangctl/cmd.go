package gangctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/podgroup"
	"github.com/custom-scheduler/custom-scheduler/pkg/generated/clientset/versioned"
)

// Clients are what kubectl gang reads through: pods and events, and PodGroups.
type Clients struct {
	Kube      kubernetes.Interface
	PodGroups versioned.Interface
}

// Connect makes the clients from the kubeconfig flags, and says which namespace they name (the
// context's, or -n's).
type Connect func(flags *genericclioptions.ConfigFlags) (Clients, string, error)

// connect is Connect against the cluster the kubeconfig names, as kubectl reads it.
func connect(flags *genericclioptions.ConfigFlags) (Clients, string, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return Clients{}, "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return Clients{}, "", fmt.Errorf("reading the kubeconfig's namespace: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, "", fmt.Errorf("making the client: %w", err)
	}
	pgs, err := versioned.NewForConfig(cfg)
	if err != nil {
		return Clients{}, "", fmt.Errorf("making the PodGroup client: %w", err)
	}
	return Clients{Kube: kube, PodGroups: pgs}, ns, nil
}

// options are the flags every subcommand shares.
type options struct {
	flags         *genericclioptions.ConfigFlags
	connect       Connect
	now           func() time.Time
	out           io.Writer
	allNamespaces bool
	output        string
	color         string
	// schedulers are the schedulerNames of our profiles (--scheduler-name).
	schedulers []string
	// watchEvents: a watch prints each change as {"type", "object"} (--output-watch-events).
	watchEvents bool
	// printed counts the objects a -o yaml stream has printed (the second one on are preceded by "---").
	printed int
}

// SchedulerNamesEnv names the environment variable that, when set, gives --scheduler-name's default
// (comma-separated).
const SchedulerNamesEnv = "KUBECTL_GANG_SCHEDULER_NAMES"

// defaultSchedulers are --scheduler-name's default: SchedulerNamesEnv's names if it is set, else
// DefaultSchedulerName.
func defaultSchedulers() []string {
	var out []string
	for _, n := range strings.Split(os.Getenv(SchedulerNamesEnv), ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return []string{DefaultSchedulerName}
	}
	return out
}

// NewCommand is kubectl-gang's root command; now is the clock (ages are measured from it), and
// connect makes the clients (nil: from the kubeconfig).
func NewCommand(out io.Writer, now func() time.Time, conn Connect) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), connect: conn, now: now, out: out}
	if o.connect == nil {
		o.connect = connect
	}
	root := &cobra.Command{
		Use:   "kubectl gang",
		Short: "Where gangs (PodGroups of custom-scheduler) stand, and what each waits for",
		Long: `kubectl gang reads PodGroups, their member pods and their events from the API (it needs get
and list on podgroups.scheduling.x-k8s.io, pods and events, and nothing of the scheduler) and says
where each gang stands and what it waits for. Pods that name a scheduler that is none of ours
(--scheduler-name: our profiles' schedulerNames, custom-scheduler unless $KUBECTL_GANG_SCHEDULER_NAMES
says otherwise) are never members of our gangs, and kubectl gang says so.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	o.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List the gangs of every namespace.")
	root.PersistentFlags().StringVar(&o.color, "color", "auto", "Colour the output: auto (when writing to a terminal), always or never.")
	root.PersistentFlags().StringSliceVar(&o.schedulers, "scheduler-name", defaultSchedulers(),
		"The schedulerNames of our scheduler's profiles (repeat it, or separate them with commas): pods naming another scheduler are never members of our gangs. Default: $"+SchedulerNamesEnv+" if set.")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if o.color != "auto" && o.color != "always" && o.color != "never" {
			return fmt.Errorf("unknown --color %q: use auto, always or never", o.color)
		}
		o.schedulers = slices.DeleteFunc(o.schedulers, func(n string) bool { return strings.TrimSpace(n) == "" })
		if len(o.schedulers) == 0 {
			return errors.New("--scheduler-name names no scheduler: name our profiles' schedulerNames")
		}
		return nil
	}
	root.AddCommand(o.getCommand(), o.explainCommand())
	return root
}

func (o *options) getCommand() *cobra.Command {
	var watchFlag bool
	cmd := &cobra.Command{
		Use:   "get [NAME]",
		Short: "One line per gang: phase, members live/bound/waiting/gated of minMember, age, what it waits for",
		Example: `  kubectl gang get -A
  kubectl gang get training -n demo -o wide
  kubectl gang get -n demo -o json
  # A job of several roles (PodGroups under a composite): any of its groups shows the job's tree.
  kubectl gang get prefill -n demo`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput("", "wide", "json", "yaml"); err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			if name != "" && o.allNamespaces {
				return errors.New("a gang's name and --all-namespaces do not go together: name a namespace with -n")
			}
			if o.watchEvents && (!watchFlag || (o.output != "json" && o.output != "yaml")) {
				return errors.New("--output-watch-events goes with --watch and -o json or yaml")
			}
			return o.get(cmd.Context(), name, watchFlag)
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: wide, json or yaml.")
	cmd.Flags().BoolVarP(&watchFlag, "watch", "w", false, "After listing, print a gang's line (with -o json or yaml: its object) again whenever its PodGroup changes.")
	cmd.Flags().BoolVar(&o.watchEvents, "output-watch-events", false, "With --watch and -o json or yaml, print each change as an object with its type (ADDED, MODIFIED, DELETED) and the gang.")
	return cmd
}

func (o *options) explainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain NAME",
		Short: "The whole story of one gang: its quorum, what it is short of, its reservation, its job's tree and the group that blocks it, members and events",
		Example: `  kubectl gang explain too-big -n demo
  kubectl gang explain too-big -n demo -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput("", "json", "yaml"); err != nil {
				return err
			}
			if o.allNamespaces {
				return errors.New("explain takes one gang: name its namespace with -n, not --all-namespaces")
			}
			return o.explain(cmd.Context(), args[0])
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml.")
	return cmd
}

func (o *options) checkOutput(allowed ...string) error {
	if slices.Contains(allowed, o.output) {
		return nil
	}
	return fmt.Errorf("unknown output format %q: use one of %s", o.output, strings.Join(slices.DeleteFunc(slices.Clone(allowed), func(s string) bool { return s == "" }), ", "))
}

// style is the colouring --color asks for.
func (o *options) style() style {
	st := o.terminal()
	switch o.color {
	case "always":
		st.on = true
	case "never":
		st.on = false
	}
	return st
}

// terminal is the style of the output's terminal: colour (unless NO_COLOR is set) and its width;
// none when the output is not a terminal.
func (o *options) terminal() style {
	f, ok := o.out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return style{}
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		width = 0
	}
	return style{on: os.Getenv("NO_COLOR") == "", width: width}
}

// get lists the gangs (or the one named), and with watch follows them.
func (o *options) get(ctx context.Context, name string, watchFlag bool) error {
	c, ns, err := o.connect(o.flags)
	if err != nil {
		return err
	}
	if o.allNamespaces {
		ns = metav1.NamespaceAll
	}
	var pgs []v1alpha1.PodGroup
	var rv string // where a watch starts: no gang twice, no change lost
	if name != "" {
		pg, err := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return apiError(err, "PodGroup", name, ns)
		}
		pgs, rv = []v1alpha1.PodGroup{*pg}, pg.ResourceVersion
	} else {
		list, err := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return apiError(err, "PodGroups", "", ns)
		}
		pgs, rv = list.Items, list.ResourceVersion
	}
	var sums []Summary
	root := "" // the named group's job, whose groups a watch follows
	if name != "" && inTree(&pgs[0]) {
		// A group of a job's tree: the tree, from its namespace's PodGroups and pods.
		if sums, err = o.treeSummaries(ctx, c, &pgs[0], nil); err != nil {
			return err
		}
		root = sums[0].Root // "" when its tree cannot be resolved: the group alone
		sums = slices.DeleteFunc(sums, func(s Summary) bool { return s.Name != name && (root == "" || s.Root != root) })
	} else {
		pods, err := memberPods(ctx, c, ns, name, madeForLWS(pointers(pgs)...))
		if err != nil {
			return err
		}
		sums = make([]Summary, 0, len(pgs))
		for i := range pgs {
			sums = append(sums, Summarize(&pgs[i], pods[pgs[i].Namespace+"/"+pgs[i].Name], nil, o.schedulers))
		}
		AttachTrees(pgs, sums)
	}
	slices.SortFunc(sums, func(a, b Summary) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	switch o.output {
	case "json", "yaml":
		if watchFlag {
			// As kubectl get -w -o json: each gang an object of its own, then one per change.
			for _, s := range sums {
				if name != "" && s.Name != name {
					continue // the named one's tree is in its object
				}
				if err := o.printObject(watch.Added, s); err != nil {
					return err
				}
			}
			return o.watch(ctx, c, nil, ns, name, root, sums, rv)
		}
		if name != "" {
			i := slices.IndexFunc(sums, func(s Summary) bool { return s.Name == name })
			return printData(o.out, o.output, sums[i])
		}
		return printData(o.out, o.output, map[string]any{"items": sums})
	}
	if len(sums) == 0 && !watchFlag {
		where := "namespace " + ns
		if ns == metav1.NamespaceAll {
			where = "any namespace"
		}
		_, err := fmt.Fprintf(o.out, "No gangs (PodGroups) in %s.\n", where)
		return err
	}
	cols := &columns{}
	if err := printTable(o.out, cols, sums, o.allNamespaces, o.output == "wide", true, o.now(), o.style()); err != nil {
		return err
	}
	if !watchFlag {
		return nil
	}
	return o.watch(ctx, c, cols, ns, name, root, sums, rv)
}

// explain prints the whole story of one gang.
func (o *options) explain(ctx context.Context, name string) error {
	c, ns, err := o.connect(o.flags)
	if err != nil {
		return err
	}
	pg, err := c.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return apiError(err, "PodGroup", name, ns)
	}
	linked := inTree(pg)
	podsOf := name
	if linked {
		podsOf = "" // every group's of the namespace, for its tree
	}
	pods, err := memberPods(ctx, c, ns, podsOf, madeForLWS(pg))
	if err != nil {
		return err
	}
	members := pods[ns+"/"+name]
	uids := []types.UID{pg.UID}
	for _, p := range members {
		uids = append(uids, p.UID)
	}
	events, err := objectEvents(ctx, c, ns, uids)
	if err != nil {
		return apiError(err, "events", "", ns)
	}
	s := Summarize(pg, members, events, o.schedulers)
	if linked {
		sums, err := o.treeSummaries(ctx, c, pg, pods)
		if err != nil {
			return err
		}
		events := s.Events
		s = sums[0]
		s.Events = events
	}
	if o.output != "" {
		return printData(o.out, o.output, s)
	}
	return printExplain(o.out, s, o.now(), o.style())
}

// treeSummaries summarizes every PodGroup of pg's namespace, with their trees (AttachTrees), from
// one list of its PodGroups and one of its member pods (pods, when the caller has listed them
// already): pg's summary first, then the others by name. pg stands for itself in the list (the list
// may be newer, or miss it: it was just deleted).
func (o *options) treeSummaries(ctx context.Context, c Clients, pg *v1alpha1.PodGroup, pods map[string][]*v1.Pod) ([]Summary, error) {
	list, err := c.PodGroups.SchedulingV1alpha1().PodGroups(pg.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, apiError(err, "PodGroups", "", pg.Namespace)
	}
	pgs := slices.DeleteFunc(list.Items, func(p v1alpha1.PodGroup) bool { return p.Name == pg.Name })
	pgs = append([]v1alpha1.PodGroup{*pg}, pgs...)
	if pods == nil {
		if pods, err = memberPods(ctx, c, pg.Namespace, "", madeForLWS(pointers(pgs)...)); err != nil {
			return nil, err
		}
	}
	sums := make([]Summary, 0, len(pgs))
	for i := range pgs {
		sums = append(sums, Summarize(&pgs[i], pods[pgs[i].Namespace+"/"+pgs[i].Name], nil, o.schedulers))
	}
	AttachTrees(pgs, sums)
	slices.SortStableFunc(sums[1:], func(a, b Summary) int { return strings.Compare(a.Name, b.Name) })
	return sums, nil
}

// eventReaders is how many event lists explain has in flight at once.
const eventReaders = 8

// objectEvents lists the events of the objects uids names in ns: one list per object, selected at
// the apiserver by involvedObject.uid (regarding.uid, for events.k8s.io events), as kubectl describe
// selects an object's events, a few lists at once; each event once, by name. Reading every event of
// the namespace instead costs as much as the namespace has events, whatever the gang's share.
func objectEvents(ctx context.Context, c Clients, ns string, uids []types.UID) ([]v1.Event, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
		out      []v1.Event
		seen     = map[string]bool{}
	)
	slots := make(chan struct{}, eventReaders)
	for _, uid := range uids {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			list, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(uid)).String()})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			for _, e := range list.Items {
				if k := e.Namespace + "/" + e.Name; !seen[k] {
					seen[k] = true
					out = append(out, e)
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	// In the order one list of them all would have (by name), whichever list came back first.
	slices.SortFunc(out, func(a, b v1.Event) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// memberPods lists the member pods of the gang name in ns (every gang's, name empty), by gang
// ("namespace/name").
func memberPods(ctx context.Context, c Clients, ns, name string, lws bool) (map[string][]*v1.Pod, error) {
	sel := v1alpha1.PodGroupLabel
	if name != "" {
		sel += "=" + name
	}
	list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, apiError(err, "pods", "", ns)
	}
	out := map[string][]*v1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		key := p.Namespace + "/" + p.Labels[v1alpha1.PodGroupLabel]
		out[key] = append(out[key], p)
	}
	if !lws {
		return out, nil
	}
	// A LeaderWorkerSet replica's pods carry no PodGroup label: its set's and replica's (podgroup.LWSGroup).
	list, err = c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podgroup.LWSNameLabel})
	if err != nil {
		return nil, apiError(err, "pods", "", ns)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if g, ok := podgroup.Of(p); ok && !podgroup.Labelled(p) && (name == "" || g == name) {
			out[p.Namespace+"/"+g] = append(out[p.Namespace+"/"+g], p)
		}
	}
	return out, nil
}

// madeForLWS reports whether one of pgs is a PodGroup the scheduler made for a LeaderWorkerSet (a
// replica's, or a set's composite): their members are listed by LWS's labels too.
func madeForLWS(pgs ...*v1alpha1.PodGroup) bool {
	for _, pg := range pgs {
		if pg.Labels[podgroup.LabelManagedBy] == podgroup.ManagedBy && pg.Labels[podgroup.LWSNameLabel] != "" {
			return true
		}
	}
	return false
}

// pointers returns pointers to pgs' items.
func pointers(pgs []v1alpha1.PodGroup) []*v1alpha1.PodGroup {
	out := make([]*v1alpha1.PodGroup, len(pgs))
	for i := range pgs {
		out[i] = &pgs[i]
	}
	return out
}

// apiError says what a failed read means for the user: a gang that does not exist, a resource the
// server does not serve, rights the credentials lack.
func apiError(err error, what, name, ns string) error {
	where := "namespace " + ns
	if ns == metav1.NamespaceAll {
		where = "any namespace"
	}
	switch {
	case apierrors.IsNotFound(err) && name != "":
		return fmt.Errorf("%s %q not found in %s", what, name, where)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the server does not serve %s (is the PodGroup CRD, podgroups.scheduling.x-k8s.io, installed?): %w", what, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("not allowed to read %s in %s: kubectl gang needs get and list on podgroups.scheduling.x-k8s.io, pods and events: %w", what, where, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the server did not accept the kubeconfig's credentials: %w", err)
	}
	return fmt.Errorf("reading %s in %s: %w", what, where, err)
}
