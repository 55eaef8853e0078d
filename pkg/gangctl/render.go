package gangctl

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/custom-scheduler/custom-scheduler/pkg/apis/scheduling/v1alpha1"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// style colours a terminal's output (none when off) and fits event messages to its width (0: no
// limit).
type style struct {
	on    bool
	width int
}

// fit shortens a message that would run past the terminal, given the width already used on its line.
func (s style) fit(msg string, used int) string {
	room := s.width - used
	if s.width == 0 || utf8.RuneCountInString(msg) <= room {
		return msg
	}
	room = max(room, 20)
	runes := []rune(msg)
	if room >= len(runes) {
		return msg
	}
	return string(runes[:room-1]) + "…"
}

func (s style) paint(code, text string) string {
	if !s.on || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

func (s style) bold(t string) string  { return s.paint("01", t) }
func (s style) red(t string) string   { return s.paint("31", t) }
func (s style) green(t string) string { return s.paint("32", t) }
func (s style) amber(t string) string { return s.paint("33", t) }

// phase colours a phase: green placed, red failed or waiting for room, amber otherwise.
func (s style) phase(sum Summary) string {
	p := string(sum.Phase)
	switch {
	case sum.Phase == v1alpha1.PodGroupFailed || sum.WaitingFor == WaitsForRoom || sum.WaitingFor == WaitsForRebind || sum.WaitingFor == WaitsForScheduler ||
		sum.WaitingFor == WaitsForGroupTree:
		return s.red(p)
	case sum.WaitingFor == WaitsForNothing:
		return s.green(p)
	}
	return s.amber(p)
}

// age is how long ago t was, as kubectl prints it ("<unknown>" for none).
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// columns pads a table's cells to the widest cell of each column seen so far (the header and the
// first rows, then each row a watch prints), two spaces apart, so that later rows line up with the
// first ones. Colour codes take no width.
type columns struct{ widths []int }

var colourCode = regexp.MustCompile("\x1b\\[[0-9;]*m")

func visible(s string) int { return utf8.RuneCountInString(colourCode.ReplaceAllString(s, "")) }

func (c *columns) write(w io.Writer, rows [][]string) error {
	for _, r := range rows {
		for i, cell := range r {
			if i == len(c.widths) {
				c.widths = append(c.widths, 0)
			}
			c.widths[i] = max(c.widths[i], visible(cell))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, cell := range r {
			b.WriteString(cell)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", c.widths[i]-visible(cell)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// relative says how far t is from now: "in 5s", or "5s ago".
func relative(now, t time.Time) string {
	if t.After(now) {
		return "in " + duration.HumanDuration(t.Sub(now))
	}
	return duration.HumanDuration(now.Sub(t)) + " ago"
}

// printTable writes one line per gang: kubectl get's columns, wide adding the reason, the domain and
// the reservation; header adds the header line. cols keeps the widths between calls (a watch). The
// groups of a job's tree follow its root, indented under their parents (see tableOrder); a
// composite's line counts groups, not pods (see row).
func printTable(w io.Writer, cols *columns, sums []Summary, allNamespaces, wide, header bool, now time.Time, st style) error {
	return printRows(w, cols, tableOrder(sums), allNamespaces, wide, header, now, st)
}

// labelled is a summary with the name its line shows.
type labelled struct {
	Summary
	label string
}

// tableOrder lays sums out in their order, but for the groups of a resolved tree: they follow their
// root (where it is), depth first, each indented under its parent; a group whose root is not among
// sums keeps its place, unindented.
func tableOrder(sums []Summary) []labelled {
	at := map[string]int{}
	for i, s := range sums {
		at[s.Namespace+"/"+s.Name] = i
	}
	done := make([]bool, len(sums))
	var out []labelled
	for i, s := range sums {
		if done[i] {
			continue
		}
		if s.Tree == nil {
			done[i] = true
			out = append(out, labelled{s, s.Name})
			continue
		}
		if _, ok := at[s.Namespace+"/"+s.Root]; ok && s.Root != s.Name {
			continue // printed under its root
		}
		for _, r := range treeRows(*s.Tree, "", true, true) {
			j, ok := at[s.Namespace+"/"+r.name]
			if !ok || done[j] {
				continue
			}
			label := r.label
			if s.Root != s.Name {
				label = r.name
			}
			done[j] = true
			out = append(out, labelled{sums[j], label})
		}
	}
	for i, s := range sums {
		if !done[i] {
			out = append(out, labelled{s, s.Name})
		}
	}
	return out
}

// printRows writes the table's lines of rows.
func printRows(w io.Writer, cols *columns, sums []labelled, allNamespaces, wide, header bool, now time.Time, st style) error {
	var rows [][]string
	if header {
		var r []string
		if allNamespaces {
			r = append(r, "NAMESPACE")
		}
		r = append(r, "NAME", st.bold("PHASE"), "LIVE", "BOUND", "WAITING", "GATED", "MIN", "AGE", "WAITING FOR")
		if wide {
			r = append(r, "REASON", "DOMAIN", "RESERVATION", "KIND")
		}
		rows = append(rows, r)
	}
	for _, s := range sums {
		var r []string
		if allNamespaces {
			r = append(r, s.Namespace)
		}
		if c := s.Composite; c != nil {
			// A composite has no pods: its children, how many are whole, and its minGroupCount.
			min := fmt.Sprint(c.MinGroupCount)
			if c.Policy != "Gang" {
				min = "-"
			}
			r = append(r, s.label, st.phase(s.Summary), fmt.Sprint(c.Children), fmt.Sprint(c.Whole), "-", "-", min, age(now, s.Created.Time), s.Short)
		} else {
			r = append(r, s.label, st.phase(s.Summary), fmt.Sprint(s.Live), fmt.Sprint(s.Bound), fmt.Sprint(s.Waiting), fmt.Sprint(s.Gated),
				fmt.Sprint(s.MinMember), age(now, s.Created.Time), s.Short)
		}
		if wide {
			r = append(r, orNone(s.Reason), orNone(domainOf(s.Summary)), orNone(reservationOf(s.Summary)), orNone(kindOf(s.Summary)))
		}
		rows = append(rows, r)
	}
	return cols.write(w, rows)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// kindOf is the object's kind and API group, as kubectl spells a resource's kind in full:
// PodGroup.scheduling.x-k8s.io (ours), PodGroup.scheduling.k8s.io, CompositePodGroup.scheduling.k8s.io.
func kindOf(s Summary) string {
	if s.Kind == "" {
		return ""
	}
	group, _, _ := strings.Cut(s.APIVersion, "/")
	return s.Kind + "." + group
}

// kindWord is the word explain names the object with: its kind (a PodGroup's when unknown).
func kindWord(s Summary) string {
	if s.Kind == "" {
		return KindPodGroup
	}
	return s.Kind
}

func domainOf(s Summary) string {
	if s.Domain == nil {
		return ""
	}
	return s.Domain.Reason
}

func reservationOf(s Summary) string {
	if s.Reservation == nil {
		return ""
	}
	if s.Reservation.Status {
		return "held"
	}
	return "ended: " + s.Reservation.Reason
}

// printExplain writes the whole story of one gang: where it stands, its quorum, its shortfall with
// what would unblock it, its domain and reservation, its members, and its events newest first.
func printExplain(w io.Writer, s Summary, now time.Time, st style) error {
	var b strings.Builder
	if c := s.Composite; c != nil {
		fmt.Fprintf(&b, "%s %s/%s (%s composite): %s, %s (age %s)\n", st.bold(kindWord(s)), s.Namespace, s.Name, strings.ToLower(c.Policy), st.phase(s), s.Short, age(now, s.Created.Time))
		if c.Policy == "Gang" {
			fmt.Fprintf(&b, "Groups:   %d of its %d children whole, of minGroupCount %d\n", c.Whole, c.Children, c.MinGroupCount)
		} else {
			fmt.Fprintf(&b, "Groups:   %d of %d children whole; a basic composite places each on its own\n", c.Whole, c.Children)
		}
	} else {
		fmt.Fprintf(&b, "%s %s/%s: %s, %s (age %s)\n", st.bold(kindWord(s)), s.Namespace, s.Name, st.phase(s), s.Short, age(now, s.Created.Time))
		if s.Derived {
			fmt.Fprintf(&b, "Quorum:   %d of minMember %d live members bound, %d gated; %d terminating, %d finished\n",
				s.Bound, s.MinMember, s.Gated, s.Terminating, s.Finished)
		} else {
			fmt.Fprintf(&b, "Quorum:   %d of minMember %d live members bound, %d waiting at Permit, %d gated; %d terminating, %d finished\n",
				s.Bound, s.MinMember, s.Waiting, s.Gated, s.Terminating, s.Finished)
		}
	}
	if s.Derived {
		fmt.Fprintf(&b, "Status:   in-tree (%s), with no status of ours: phase and reason derived from its members and its own conditions; "+
			"members waiting at Permit, the shortfall's numbers and a reservation are the scheduler's alone\n", s.APIVersion)
	}
	for i, c := range s.Upstream {
		lead := "          "
		if i == 0 {
			lead = "Upstream: "
		}
		fmt.Fprintf(&b, "%s%s=%s, %s (for %s): %s\n", lead, c.Type, c.Status, c.Reason, age(now, c.Since.Time), c.Message)
	}
	if s.Foreign > 0 {
		fmt.Fprintf(&b, "Not ours: %d of its %d live pods name %s, which no scheduler of ours (%s; --scheduler-name) serves: they are never members of our gangs, nor counted above\n",
			s.Foreign, s.Foreign+s.Live, strings.Join(s.ForeignSchedulers, ", "), strings.Join(s.Schedulers, ", "))
	}
	if s.Reason != "" {
		since := ""
		if s.Since != nil {
			since = fmt.Sprintf(" (for %s)", age(now, s.Since.Time))
		}
		fmt.Fprintf(&b, "Why:      %s%s: %s\n", s.Reason, since, s.Message)
	}
	if sf := s.Shortfall; sf != nil {
		fits := fmt.Sprintf("; the free room fits %d", sf.Placeable)
		if sf.Reason == v1alpha1.ShortfallTooFewMembers || sf.Reason == v1alpha1.ShortfallMinResources {
			fits = "" // the check stopped before it placed any
		}
		fmt.Fprintf(&b, "Short:    %s: %d more members must be placed at once%s (%d unscheduled members exist)\n",
			sf.Reason, sf.Needed, fits, sf.Unscheduled)
		if len(sf.Resources) > 0 {
			rows := [][]string{{"          RESOURCE", "NEEDED", "FREE", "LARGEST MEMBER", "LARGEST FREE ON A NODE"}}
			for _, r := range sf.Resources {
				rows = append(rows, []string{"          " + string(r.Name), r.Requested.String(), r.Free.String(), r.Member.String(), r.LargestFree.String()})
			}
			_ = (&columns{}).write(&b, rows)
			if len(deviceRows(sf.Resources)) > 0 {
				b.WriteString("          (a devices/<class> row counts members: one is the devices one member claims)\n")
			}
		}
		if len(sf.Domains) > 0 {
			var ds []string
			for _, d := range sf.Domains {
				ds = append(ds, fmt.Sprintf("%s fits %d", d.Value, d.Placeable))
			}
			fmt.Fprintf(&b, "Domains:  %s: %s\n", sf.TopologyKey, strings.Join(ds, ", "))
		}
	}
	for i, u := range s.Unblock {
		lead := "          "
		if i == 0 {
			lead = "Unblock:  "
		}
		fmt.Fprintf(&b, "%s%s\n", lead, st.amber(u))
	}
	if u := s.BackoffUntil; u != nil && (s.WaitingFor == WaitsForBackoff) {
		fmt.Fprintf(&b, "Back-off: until %s (%s); then its members are tried again\n", u.UTC().Format(time.RFC3339), relative(now, u.Time))
	}
	if d := s.Domain; d != nil {
		fmt.Fprintf(&b, "Domain:   %s: %s\n", d.Reason, d.Message)
	}
	if r := s.Reservation; r != nil {
		if r.Status {
			until := ""
			if u := s.ReservedUntil; u != nil {
				until = fmt.Sprintf(", until %s at the latest (%s)", u.UTC().Format(time.RFC3339), relative(now, u.Time))
			}
			fmt.Fprintf(&b, "Reserved: %s (for %s%s); pods of its priority or lower are kept off the held nodes\n", r.Message, age(now, r.Since.Time), until)
		} else {
			fmt.Fprintf(&b, "Reserved: no; the last reservation ended %s ago: %s: %s\n", age(now, r.Since.Time), r.Reason, r.Message)
		}
	}
	writeTree(&b, s, st)
	fmt.Fprintf(&b, "Members (%d):\n", len(s.Members))
	if len(s.Members) == 0 {
		b.WriteString("  <none>\n")
	} else {
		var rows [][]string
		for _, m := range s.Members {
			r := []string{"  " + m.Name, m.State}
			switch {
			case m.State == StateGated:
				r = append(r, "gates: "+strings.Join(m.Gates, ", "))
			case m.Node != "":
				r = append(r, m.Node)
			case m.Nominated != "":
				r = append(r, "nominated to "+m.Nominated)
			}
			if m.Foreign {
				r = append(r, "scheduler "+m.Scheduler+" (not ours)")
			}
			rows = append(rows, r)
		}
		_ = (&columns{}).write(&b, rows)
	}
	fmt.Fprintf(&b, "Events (%d, newest first):\n", len(s.Events))
	if len(s.Events) == 0 {
		b.WriteString("  <none>\n")
	} else {
		// The messages come last, cut to the terminal's width once the other columns are laid out.
		cols := &columns{}
		rows := make([][]string, len(s.Events))
		for i, e := range s.Events {
			typ := e.Type
			if typ == v1.EventTypeWarning {
				typ = st.red(typ)
			}
			rows[i] = []string{"  " + age(now, e.Last.Time), typ, e.Reason, e.Object, ""}
		}
		_ = cols.write(io.Discard, rows)
		used := 0
		for _, w := range cols.widths[:4] {
			used += w + 2
		}
		for i, e := range s.Events {
			count := ""
			if e.Count > 1 {
				count = fmt.Sprintf(" (x%d)", e.Count)
			}
			rows[i][4] = st.fit(e.Message, used+len(count)) + count
		}
		_ = cols.write(&b, rows)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTree writes the job a group of a tree is part of: its tree with each group's numbers, and
// the groups that keep it from being whole with what each waits for and what would unblock it; or
// why its tree cannot be resolved.
func writeTree(b *strings.Builder, s Summary, st style) {
	if p := s.TreeProblem; p != nil {
		fmt.Fprintf(b, "Tree:     %s: %s; the scheduler holds back its members not yet placed, holding nothing, until the PodGroups are fixed\n",
			st.red(p.Reason), p.Message)
		if s.Parent != "" {
			fmt.Fprintf(b, "          (its parent, by annotation %s: %s)\n", tree.AnnotationParent, s.Parent)
		}
		return
	}
	t := s.Tree
	if t == nil {
		return
	}
	whole := "whole"
	if !t.Whole {
		whole = "not whole"
	}
	fmt.Fprintf(b, "Job:      %s, %s: a group is whole with minMember members bound, a gang composite with minGroupCount whole children\n", t.Name, whole)
	var rows [][]string
	for _, r := range treeRows(*t, "", true, true) {
		n := find(*t, r.name)
		unit := ""
		if n.Composite {
			unit = " groups"
		}
		rows = append(rows, []string{"          " + r.label, string(n.Phase), fmt.Sprintf("%d/%d%s", n.Bound, n.Min, unit), n.Short})
	}
	_ = (&columns{}).write(b, rows)
	for i, k := range s.Blockers {
		lead := "          "
		if i == 0 {
			lead = "Blocked:  "
		}
		if k.Composite {
			fmt.Fprintf(b, "%s%s: %d of minGroupCount %d groups whole; it needs %d more\n", lead, k.Name, k.Bound, k.Min, k.Needs)
			continue
		}
		fmt.Fprintf(b, "%s%s: %d of minMember %d members bound, waiting for %s (%s)\n", lead, k.Name, k.Bound, k.Min, k.WaitingFor, st.amber(k.Short))
		if k.Name == s.Name {
			if len(k.Unblock) > 0 {
				b.WriteString("            (what would unblock it: Unblock, above)\n")
			}
			continue
		}
		for _, u := range k.Unblock {
			fmt.Fprintf(b, "            unblock: %s\n", st.amber(u))
		}
		if k.Message != "" {
			fmt.Fprintf(b, "            why: %s\n", k.Message)
		}
	}
}

// printData writes v as JSON or YAML.
func printData(w io.Writer, format string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the output: %w", err)
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return fmt.Errorf("encoding the output: %w", err)
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}
