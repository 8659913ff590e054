package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

func (s *Session) report(args []string) error {
	stdout := s.Stdout
	fs := NewFlags("report")
	asJSON := fs.Bool("json", false, "write JSON (for scripts) instead of text")
	budgetMS := fs.Float64("budget-ms", 16, "the main thread's budget in ms: a call busy longer, none of whose children is, is a hitch")
	top := fs.Int("top", 10, "the length of every list")
	noIdle := fs.Bool("no-idle", false, "no run-loop waits: every call's own time is busy time")
	minUS := fs.Float64("min-us", 0, "drop calls shorter than this many microseconds")
	maxDepth := fs.Int("max-depth", -1, "drop calls deeper than this (0 = outermost only)")
	threads := fs.String("threads", "all", "all, main, or a comma list of thread names and ids")
	var idle, inc, exc patterns
	fs.Var(&idle, "idle", "a method whose own time is a run loop waiting, not work (repeatable; added to: "+strings.Join(report.DefaultIdle, ", ")+")")
	fs.Var(&inc, "include", "keep only methods matching this pattern (repeatable)")
	fs.Var(&exc, "exclude", "drop methods matching this pattern (repeatable)")
	pos, err := ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError("report takes one or more traces (streams, a raw dump) or directories of streams")
	}
	if *minUS < 0 || *maxDepth < -1 || *top < 1 || *budgetMS <= 0 {
		return usageError("-min-us and -max-depth must not be negative, -top and -budget-ms must be positive")
	}
	if err := engine.ValidateThreads(*threads); err != nil {
		return usageError(err.Error())
	}
	files, err := expandTraces(pos)
	if err != nil {
		return err
	}
	in, err := openTraces(files)
	if err != nil {
		return err
	}
	defer in.close()
	ropt := report.ReportOptions{BudgetNanos: uint64(*budgetMS * 1e6), Top: *top}
	switch {
	case *noIdle:
		ropt.Idle = append([]string{}, idle...)
	case len(idle) > 0:
		ropt.Idle = append(append([]string{}, report.DefaultIdle...), idle...)
	}
	sink := report.NewReportSink(ropt)
	opt := engine.Options{MinNanos: *minUS * 1000, MaxDepth: *maxDepth, Include: inc, Exclude: exc, Threads: *threads}
	tot, err := in.process(opt, sink, s)
	if err != nil {
		return err
	}
	s.reportStreams(tot)
	w := bufio.NewWriterSize(stdout, 1<<16)
	if *asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(sink.Report())
	} else {
		writeReport(w, sink.Report(), *top)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// expandTraces replaces each directory by the trace files in it (streams, raw dumps: told by
// their magic), sorted by name.
func expandTraces(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		files, err := tracesIn(p)
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s holds no trace (no stream or raw dump)", p)
		}
		out = append(out, files...)
	}
	return out, nil
}

// tracesIn lists the regular files of dir that begin with a trace's magic.
func tracesIn(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if isTrace(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// isTrace tells a stream (MTSF) or a raw dump (MSGTRACE) by its first bytes.
func isTrace(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var m [len(stream.Magic)]byte
	n, _ := io.ReadFull(f, m[:])
	return strings.HasPrefix(string(m[:n]), stream.StreamMagic) || string(m[:n]) == stream.Magic
}

// ms formats nanoseconds as milliseconds.
func ms(ns uint64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }

func plural(n uint64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// writeReport writes the report for a person.
func writeReport(w io.Writer, r *report.Report, top int) {
	rt := r.Recorder
	fmt.Fprintf(w, "%s (%d kept) on %s of %s; main-thread budget %s ms\n",
		plural(rt.Calls, "call", "calls"), rt.Kept, plural(rt.Threads, "thread", "threads"), plural(rt.Processes, "process", "processes"), ms(r.BudgetNanos))
	writeLaunches(w, r.Launches, top) // report_launch.go

	fmt.Fprintf(w, "\nHITCHES: main-thread calls busy over %s ms none of whose children is (the innermost call that held the thread)\n", ms(r.BudgetNanos))
	if r.HitchCount == 0 {
		fmt.Fprintf(w, "  none\n")
	} else {
		fmt.Fprintf(w, "  %d, %s ms in all", r.HitchCount, ms(r.HitchNanos))
		if len(r.Hitches) < r.HitchCount {
			fmt.Fprintf(w, "; the %d longest:", len(r.Hitches))
		}
		fmt.Fprintln(w)
		writeCalls(w, r.Hitches, true, r.Recorder.Processes > 1)
	}
	fmt.Fprintf(w, "\nLONG CALLS ON OTHER THREADS (the same rule; not hitches)\n")
	if r.OffMainCount == 0 {
		fmt.Fprintf(w, "  none\n")
	} else {
		if len(r.OffMain) < r.OffMainCount {
			fmt.Fprintf(w, "  %d; the %d longest:\n", r.OffMainCount, len(r.OffMain))
		}
		writeCalls(w, r.OffMain, true, r.Recorder.Processes > 1)
	}

	fmt.Fprintf(w, "\nTHREADS\n")
	shown, rest := boundThreads(r.Threads, top)
	for _, th := range shown {
		fmt.Fprintf(w, "\n%s", th.Name)
		if r.Recorder.Processes > 1 || th.Program != "" {
			fmt.Fprintf(w, " of %s (pid %d)", th.Program, th.PID)
		}
		fmt.Fprintf(w, ", tid %d: %s, busy %s ms", th.TID, plural(th.Calls, "call", "calls"), ms(th.BusyNanos))
		if th.IdleNanos > 0 {
			fmt.Fprintf(w, " (and %s ms waiting in its run loop)", ms(th.IdleNanos))
		}
		if th.Hitches > 0 {
			if th.Main {
				fmt.Fprintf(w, ", %s", plural(uint64(th.Hitches), "hitch", "hitches"))
			} else {
				fmt.Fprintf(w, ", %s", plural(uint64(th.Hitches), "long call", "long calls"))
			}
		}
		if th.Unwound+th.Open+th.Lost > 0 {
			fmt.Fprintf(w, ", %d unwound, %d still running, %d lost", th.Unwound, th.Open, th.Lost)
		}
		fmt.Fprintln(w)
		if th.CPU != nil {
			fmt.Fprintf(w, "  on CPU: %s\n", th.CPU.Phrase())
		}
		writeMethodTops(w, th.Methods, "  ")
	}
	if len(rest) > 0 {
		var calls, busy uint64
		for _, th := range rest {
			calls, busy = calls+th.Calls, busy+th.BusyNanos
		}
		what := "threads"
		if len(rest) == 1 {
			what = "thread"
		}
		fmt.Fprintf(w, "\nand %d more %s (%s, busy %s ms; report --json lists every thread)\n",
			len(rest), what, plural(calls, "call", "calls"), ms(busy))
	}
	if len(r.Threads) > 1 {
		fmt.Fprintf(w, "\nALL THREADS\n")
		writeMethodTops(w, r.Methods, "  ")
	}

	fmt.Fprintf(w, "\nLONGEST CALLS (any thread, any depth)\n")
	writeCalls(w, r.Longest, false, r.Recorder.Processes > 1)
	if r.OpenCount > 0 {
		fmt.Fprintf(w, "\nSTILL RUNNING AT THE END OF THE TRACE: %d (hangs, or the trace was cut)\n", r.OpenCount)
		writeCalls(w, r.Open, false, r.Recorder.Processes > 1)
	}

	fmt.Fprintf(w, "\nLOSSES AND THE RECORDER\n")
	l := r.Losses
	fmt.Fprintf(w, "  %s (no buffer space), %s (deeper than the shadow stack), %s (ring mode)\n",
		plural(rt.Dropped, "call lost", "calls lost"), plural(rt.Overflow, "call overflowed", "calls overflowed"), plural(l.Overwritten.Calls, "call overwritten", "calls overwritten"))
	fmt.Fprintf(w, "  %s for buffer space (%s ms), %s an exception went through, %s still running at the end\n",
		plural(l.Waits.Count, "wait", "waits"), ms(l.Waits.Nanos), plural(r.Unwound, "call", "calls"), plural(r.OpenCount, "call", "calls"))
	if rt.BadFrames+rt.TornBytes+rt.Unended+rt.Unwritten > 0 {
		fmt.Fprintf(w, "  streams: %d damaged frames skipped (%d bytes), %d bytes cut at the end, %d of %d processes did not end cleanly, %d bytes the recorder could not write\n",
			rt.BadFrames, rt.BadBytes, rt.TornBytes, rt.Unended, rt.Processes, rt.Unwritten)
	}
}

// boundThreads picks the threads the text shows, in the report's order: every one when there
// are at most top, else the main threads and the busiest others, top in all (at least the
// main threads); the others are rest.
func boundThreads(ths []report.ThreadReport, top int) (shown, rest []report.ThreadReport) {
	if len(ths) <= top {
		return ths, nil
	}
	order := make([]int, len(ths))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := &ths[order[a]], &ths[order[b]]
		if x.Main != y.Main {
			return x.Main
		}
		return x.BusyNanos > y.BusyNanos
	})
	keep := make([]bool, len(ths))
	for n, i := range order {
		keep[i] = n < top || ths[i].Main
	}
	for i, th := range ths {
		if keep[i] {
			shown = append(shown, th)
		} else {
			rest = append(rest, th)
		}
	}
	return shown, rest
}

// writeCalls lists calls with their stacks (and children, for hitches).
func writeCalls(w io.Writer, cs []report.ReportCall, children, pids bool) {
	for _, c := range cs {
		where := c.Thread
		if pids {
			where += fmt.Sprintf(" of pid %d", c.PID)
		}
		flags := ""
		if c.Open {
			flags += ", still running at the end"
		}
		if c.Unwound {
			flags += ", unwound"
		}
		fmt.Fprintf(w, "  %10s ms  %s  (self %s ms, %s, at %s s%s)\n", ms(c.DurNanos), engine.DisplayName(c.Method), ms(c.SelfNanos), where,
			fmt.Sprintf("%.3f", float64(c.StartNanos)/1e9), flags)
		if len(c.Stack) > 0 {
			fmt.Fprintf(w, "                 in %s\n", report.StackString(c.Stack))
		}
		if c.WaitNanos > 0 {
			fmt.Fprintf(w, "                 of which %s ms the recorder waited for buffer space\n", ms(c.WaitNanos))
		}
		if c.CPU != nil {
			fmt.Fprintf(w, "                 %s\n", c.CPU.Phrase(c.DurNanos))
		}
		if c.EnqueuedBy != nil {
			fmt.Fprintf(w, "                 %s\n", c.EnqueuedBy)
		}
		if c.Why != "" {
			fmt.Fprintf(w, "                 %s\n", c.Why)
		}
		if children && len(c.Children) > 0 {
			var ks []string
			for _, k := range c.Children {
				ks = append(ks, fmt.Sprintf("%s x%d %s ms", engine.DisplayName(k.Method), k.Calls, ms(k.DurNanos)))
			}
			fmt.Fprintf(w, "                 calls %s\n", strings.Join(ks, ", "))
		}
	}
}

// writeMethodTops writes the three top lists as one table each.
func writeMethodTops(w io.Writer, t report.MethodTops, indent string) {
	for _, l := range []struct {
		title string
		ms    []report.MethodStat
	}{{"by self time", t.BySelf}, {"by total time (recursion counted once)", t.ByTotal}, {"by calls", t.ByCalls}} {
		if len(l.ms) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s%s:\n", indent, l.title)
		writeMethodTable(w, l.ms, indent+"  ")
	}
}

func writeMethodTable(w io.Writer, ms_ []report.MethodStat, indent string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%sself ms\ttotal ms\tcalls\t\tmethod\n", indent)
	for _, m := range ms_ {
		idle := ""
		if m.Idle {
			idle = "  (run-loop wait)"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%d\t\t%s%s\n", indent, ms(m.SelfNanos), ms(m.TotalNanos), m.Calls, engine.DisplayName(m.Method), idle)
	}
	tw.Flush()
}

// writeSummary is what run prints after the trace: the top methods by self time
// over every thread, and the hitches.
func writeSummary(w io.Writer, r *report.Report, n int) {
	if len(r.Methods.BySelf) == 0 {
		return
	}
	list := r.Methods.BySelf[:min(n, len(r.Methods.BySelf))]
	fmt.Fprintf(w, "top %d methods by self time:\n", len(list))
	writeMethodTable(w, list, "")
	if r.HitchCount == 0 {
		fmt.Fprintf(w, "no hitches: no main-thread call was busy over %s ms\n", ms(r.BudgetNanos))
		return
	}
	fmt.Fprintf(w, "%s (main-thread calls busy over %s ms none of whose children is), %s ms in all:\n",
		plural(uint64(r.HitchCount), "hitch", "hitches"), ms(r.BudgetNanos), ms(r.HitchNanos))
	hs := r.Hitches[:min(n, len(r.Hitches))]
	writeCalls(w, hs, true, r.Recorder.Processes > 1)
}

// shellQuote quotes a path for a command line a person copies.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=+,:@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
