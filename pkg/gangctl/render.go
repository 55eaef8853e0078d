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
	case sum.Phase == v1alpha1.PodGroupFailed || sum.WaitingFor == WaitsForRoom || sum.WaitingFor == WaitsForRebind || sum.WaitingFor == WaitsForScheduler:
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
// the reservation; header adds the header line. cols keeps the widths between calls (a watch).
func printTable(w io.Writer, cols *columns, sums []Summary, allNamespaces, wide, header bool, now time.Time, st style) error {
	var rows [][]string
	if header {
		var r []string
		if allNamespaces {
			r = append(r, "NAMESPACE")
		}
		r = append(r, "NAME", st.bold("PHASE"), "LIVE", "BOUND", "WAITING", "GATED", "MIN", "AGE", "WAITING FOR")
		if wide {
			r = append(r, "REASON", "DOMAIN", "RESERVATION")
		}
		rows = append(rows, r)
	}
	for _, s := range sums {
		var r []string
		if allNamespaces {
			r = append(r, s.Namespace)
		}
		r = append(r, s.Name, st.phase(s), fmt.Sprint(s.Live), fmt.Sprint(s.Bound), fmt.Sprint(s.Waiting), fmt.Sprint(s.Gated),
			fmt.Sprint(s.MinMember), age(now, s.Created.Time), s.Short)
		if wide {
			r = append(r, orNone(s.Reason), orNone(domainOf(s)), orNone(reservationOf(s)))
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
	fmt.Fprintf(&b, "%s %s/%s: %s, %s (age %s)\n", st.bold("PodGroup"), s.Namespace, s.Name, st.phase(s), s.Short, age(now, s.Created.Time))
	fmt.Fprintf(&b, "Quorum:   %d of minMember %d live members bound, %d waiting at Permit, %d gated; %d terminating, %d finished\n",
		s.Bound, s.MinMember, s.Waiting, s.Gated, s.Terminating, s.Finished)
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
