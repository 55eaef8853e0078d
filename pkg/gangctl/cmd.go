package gangctl

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

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
	// errOut takes warnings (the command's stderr).
	errOut io.Writer
	// inTree says which in-tree APIs the apiserver serves, once asked (see inTreeServed).
	inTree *inTreeAPIs
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
	o := &options{flags: genericclioptions.NewConfigFlags(true), connect: conn, now: now, out: out, errOut: os.Stderr}
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
says otherwise) are never members of our gangs, and kubectl gang says so. Where the apiserver serves
them, in-tree PodGroups and CompositePodGroups (scheduling.k8s.io) are shown too, named
podgroups.scheduling.k8s.io/NAME and compositepodgroups.scheduling.k8s.io/NAME, their phase derived from
their members (reading them needs get and list on them).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	o.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List the gangs of every namespace.")
	root.PersistentFlags().StringVar(&o.color, "color", "auto", "Colour the output: auto (when writing to a terminal), always or never.")
	root.PersistentFlags().StringSliceVar(&o.schedulers, "scheduler-name", defaultSchedulers(),
		"The schedulerNames of our scheduler's profiles (repeat it, or separate them with commas): pods naming another scheduler are never members of our gangs. Default: $"+SchedulerNamesEnv+" if set.")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		o.errOut = cmd.ErrOrStderr()
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
