package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
)

// writeLaunches writes the LAUNCH section: per process, its launch marks with the time from
// the process's start and from the mark before, where the launch ended and why, and the top
// longest +load and +initialize calls with the count and time of the others.
func writeLaunches(w io.Writer, ls []report.Launch, top int) {
	if len(ls) == 0 {
		return
	}
	for _, l := range ls {
		fmt.Fprintf(w, "\nLAUNCH of %s (pid %d): %s ms", l.Program, l.PID, ms(l.DurNanos))
		switch l.End.Reason {
		case "mark":
			fmt.Fprintf(w, " to the app's mark %q", l.End.Name)
		case "long call":
			fmt.Fprintf(w, " to the end of %s (the first call on the main thread after main busy over the budget)", l.End.Name)
		default:
			fmt.Fprintf(w, " to the end of the last call (no mark of the app's, no long call on the main thread)")
		}
		if l.MainNanos > 0 {
			fmt.Fprintf(w, "; %s ms before main", ms(l.MainNanos))
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "    at ms\tstep ms\t\tmark\n")
		var prev uint64
		for i, m := range l.Marks {
			note := ""
			if m.PrecisionNanos > 0 {
				note = fmt.Sprintf("  (up to %s ms earlier: the kernel's record)", ms(m.PrecisionNanos))
			}
			if m.Kind == "mark" {
				note += "  (the app's mark)"
			}
			step := "-"
			if i > 0 {
				step = ms(m.StartNanos - min(prev, m.StartNanos))
			}
			fmt.Fprintf(tw, "    %s\t%s\t\t%s%s\n", ms(m.StartNanos), step, m.Name, note)
			prev = m.StartNanos
		}
		if l.End.Reason != "mark" {
			fmt.Fprintf(tw, "    %s\t%s\t\tend of launch: %s\n", ms(l.End.EndNanos), ms(l.End.EndNanos-min(prev, l.End.EndNanos)), l.End.Reason)
		}
		tw.Flush()
		for _, lc := range []struct {
			sel string
			c   report.LaunchCalls
		}{{"+load", l.Load}, {"+initialize", l.Initialize}} {
			writeLaunchCalls(w, lc.sel, &lc.c, top)
		}
	}
}

// writeLaunchCalls writes the calls of one selector: their count and time, the top longest
// (then in the order they started), and how many others there are and their time (of those
// outside every other call of the selector, as the count's time).
func writeLaunchCalls(w io.Writer, sel string, lc *report.LaunchCalls, top int) {
	fmt.Fprintf(w, "  %s: %s, %s ms", sel, plural(lc.Calls, "call", "calls"), ms(lc.Nanos))
	list := lc.List
	if len(list) > top {
		list = slices.Clone(list)
		slices.SortStableFunc(list, func(a, b report.ReportCall) int { return cmp.Compare(b.DurNanos, a.DurNanos) })
		list = list[:top]
		slices.SortStableFunc(list, func(a, b report.ReportCall) int { return cmp.Compare(a.StartNanos, b.StartNanos) })
		fmt.Fprintf(w, "; the %d longest:", top)
	}
	fmt.Fprintln(w)
	for _, c := range list {
		fmt.Fprintf(w, "  %10s ms  %s  (at %s ms, %s)\n", ms(c.DurNanos), engine.DisplayName(c.Method), ms(c.StartNanos), c.Thread)
	}
	if n := uint64(len(list)); n < lc.Calls {
		var rest uint64
		for _, c := range lc.List {
			if report.LaunchOutermost(&c) {
				rest += c.DurNanos
			}
		}
		for _, c := range list {
			if report.LaunchOutermost(&c) {
				rest -= c.DurNanos
			}
		}
		fmt.Fprintf(w, "  and %d more (total %s ms)\n", lc.Calls-n, ms(rest))
	}
}
