package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/google/pprof/profile"
	"github.com/msgtrace/msgtrace/tracer"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/sink"
)

func (s *Session) diff(args []string) error {
	stdout := s.Stdout
	fs := NewFlags("diff")
	asJSON := fs.Bool("json", false, "write JSON")
	markdown := fs.Bool("markdown", false, "write Markdown (a pull request comment)")
	threshold := fs.Float64("threshold", 10, "a change must be at least this many percent of the base")
	minSelfMS := fs.Float64("min-self-ms", 1, "and at least this many ms of self (or total) time per run")
	minCalls := fs.Float64("min-calls", 100, "and, for calls, at least this many calls per run")
	alpha := fs.Float64("alpha", 0.05, "and beyond noise: the rank test's two-sided p-value at most this")
	top := fs.Int("top", 20, "text and Markdown: list at most this many methods per section (JSON: all)")
	threads := fs.String("threads", "all", "all, main, or a comma list of thread names and ids")
	pprofBase := fs.String("pprof-base", "", "also write BASE as a pprof profile, mean per run (go tool pprof -diff_base FILE HEAD.pb.gz)")
	pprofHead := fs.String("pprof-head", "", "also write HEAD as a pprof profile, mean per run")
	var inc, exc patterns
	fs.Var(&inc, "include", "keep only methods matching this pattern (repeatable)")
	fs.Var(&exc, "exclude", "drop methods matching this pattern (repeatable)")
	pos, err := ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError(fmt.Sprintf("diff takes BASE and HEAD, got %d arguments", len(pos)))
	}
	if *asJSON && *markdown {
		return usageError("--json or --markdown, not both")
	}
	if *threshold < 0 || *minSelfMS < 0 || *minCalls < 0 || *alpha <= 0 || *alpha > 1 || *top < 1 {
		return usageError("--threshold, --min-self-ms and --min-calls must not be negative, --alpha is in (0, 1], --top positive")
	}
	if (*pprofBase == "") != (*pprofHead == "") {
		return usageError("--pprof-base and --pprof-head go together")
	}
	for _, p := range []string{*pprofBase, *pprofHead} {
		if p == "" {
			continue
		}
		if err := tracer.CheckOutputName(p, "pprof"); err != nil {
			return usageError(err.Error())
		}
	}
	if err := engine.ValidateThreads(*threads); err != nil {
		return usageError(err.Error())
	}
	opt := engine.Options{MaxDepth: -1, Include: inc, Exclude: exc, Threads: *threads}
	var sides [2][]*report.RunProfile
	for i, p := range pos {
		runs, err := runsOf(p)
		if err != nil {
			return err
		}
		out := []string{*pprofBase, *pprofHead}[i]
		var profs []*profile.Profile
		for _, r := range runs {
			prof, pp, err := profileRun(r, opt, out != "", s)
			if err != nil {
				return err
			}
			sides[i] = append(sides[i], prof)
			if pp != nil {
				profs = append(profs, pp)
			}
		}
		if out != "" {
			if err := writeMeanProfile(out, profs); err != nil {
				return err
			}
		}
	}
	d := report.Diff(sides[0], sides[1], report.DiffOptions{ThresholdPct: *threshold, MinSelfNanos: *minSelfMS * 1e6,
		MinCalls: *minCalls, Alpha: *alpha})
	w := bufio.NewWriterSize(stdout, 1<<16)
	switch {
	case *asJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(d)
	case *markdown:
		writeDiffMarkdown(w, d, pos, *top)
	default:
		writeDiffText(w, d, pos, *top)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	if d.Regressed() {
		return ExitStatus(3)
	}
	return nil
}

// runsOf lists the runs of one side: a trace file is one run; a directory holds one run per
// trace file in it and one per subdirectory holding traces (a run of several processes).
func runsOf(path string) ([][]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return [][]string{{path}}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var runs [][]string
	for _, e := range ents {
		p := filepath.Join(path, e.Name())
		switch {
		case e.IsDir():
			if files, err := tracesIn(p); err == nil && len(files) > 0 {
				runs = append(runs, files)
			}
		case e.Type().IsRegular() && isTrace(p):
			runs = append(runs, []string{p})
		}
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%s holds no trace: give a trace, or a directory of traces (one per run) or of run directories", path)
	}
	return runs, nil
}

// profileRun reads one run: its methods, and its pprof profile when asked.
func profileRun(files []string, opt engine.Options, withPprof bool, s *Session) (*report.RunProfile, *profile.Profile, error) {
	in, err := openTraces(files)
	if err != nil {
		return nil, nil, err
	}
	defer in.close()
	ps := report.NewProfileSink()
	var out engine.Sink = ps
	var buf bytes.Buffer
	if withPprof {
		pp := sink.NewPprofSink(&buf)
		pp.Meta = sink.Meta{Program: filepath.Base(files[0])}
		out = engine.Tee(ps, pp)
	}
	tot, err := in.process(opt, out, s)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", strings.Join(files, ", "), err)
	}
	s.reportStreams(tot)
	if !withPprof {
		return ps.Profile(), nil, nil
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		return nil, nil, err
	}
	return ps.Profile(), p, nil
}

// writeMeanProfile merges the runs' profiles (thread ids dropped, so a thread's samples of
// every run merge) and scales them to the mean per run.
func writeMeanProfile(path string, ps []*profile.Profile) error {
	for _, p := range ps {
		for _, s := range p.Sample {
			delete(s.NumLabel, "tid")
			delete(s.NumUnit, "tid")
		}
		for _, m := range p.Mapping {
			m.File = "msgtrace"
		}
	}
	merged, err := profile.Merge(ps)
	if err != nil {
		return fmt.Errorf("merging the runs' profiles: %w", err)
	}
	merged.Scale(1 / float64(len(ps)))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := merged.Write(f); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// number formats a metric's value: ms for times, a count for calls.
func number(metric string, v float64) string {
	if metric == "calls" {
		if v == float64(int64(v)) {
			return fmt.Sprintf("%d", int64(v))
		}
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3f ms", v/1e6)
}

func change(e report.DiffEntry) string {
	if e.ChangePct == nil {
		return "new"
	}
	return fmt.Sprintf("%+.1f%%", *e.ChangePct)
}

func pval(p float64) string {
	if p < 0.001 {
		return "<0.001"
	}
	return fmt.Sprintf("%.3f", p)
}

func diffRule(d *report.DiffResult) string {
	s := fmt.Sprintf("a change counts when the median run and the fastest run both moved by %g%% and %s of self time (%g calls) per run", d.ThresholdPct, number("self", d.MinSelfNanos), d.MinCalls)
	if d.Testable {
		return s + fmt.Sprintf(", beyond noise: Mann-Whitney U over the runs, Holm-adjusted p <= %g", d.Alpha)
	}
	return s + fmt.Sprintf("; too few runs for a noise test (%d and %d: the smallest p possible is %.3f): thresholds alone decide, record 4 or more runs a side", d.BaseRuns, d.HeadRuns, d.MinP)
}

func writeDiffText(w io.Writer, d *report.DiffResult, pos []string, top int) {
	fmt.Fprintf(w, "base: %d runs (%s)   head: %d runs (%s)\n%s\n", d.BaseRuns, pos[0], d.HeadRuns, pos[1], diffRule(d))
	section := func(title string, es []report.DiffEntry) {
		fmt.Fprintf(w, "\n%s: ", title)
		if len(es) == 0 {
			fmt.Fprintln(w, "none")
			return
		}
		fmt.Fprintln(w, len(es))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  metric\tbase/run\thead/run\tchange\tp (Holm)\tmethod")
		for _, e := range es[:min(top, len(es))] {
			via := ""
			if len(e.Via) > 0 {
				var vs []string
				for _, v := range e.Via {
					vs = append(vs, engine.DisplayName(v))
				}
				via = "  (via " + strings.Join(vs, ", ") + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s%s\n", e.Metric, number(e.Metric, e.Base), number(e.Metric, e.Head), change(e), pval(e.PAdjusted), engine.DisplayName(e.Method), via)
		}
		tw.Flush()
		if len(es) > top {
			fmt.Fprintf(w, "  ... %d more (--top, --json)\n", len(es)-top)
		}
	}
	section("REGRESSIONS", d.Regressions)
	section("IMPROVEMENTS", d.Improvements)
	section("SLOWER ONLY THROUGH WHAT THEY CALL (own time unchanged; not regressions)", d.ThroughCallees)
	presence := func(title string, ps []report.PresenceEntry, runs int) {
		fmt.Fprintf(w, "\n%s: ", title)
		if len(ps) == 0 {
			fmt.Fprintln(w, "none")
			return
		}
		fmt.Fprintln(w, len(ps))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  self/run\tcalls/run\truns\tmethod")
		for _, p := range ps[:min(top, len(ps))] {
			mark := ""
			if p.Regression {
				mark = "  REGRESSION"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d/%d\t%s%s\n", number("self", p.SelfNanos), number("calls", p.Calls), p.Runs, runs, engine.DisplayName(p.Method), mark)
		}
		tw.Flush()
		if len(ps) > top {
			fmt.Fprintf(w, "  ... %d more (--top, --json)\n", len(ps)-top)
		}
	}
	presence("NEW (head only)", d.New, d.HeadRuns)
	presence("VANISHED (base only)", d.Vanished, d.BaseRuns)
	if d.Regressed() {
		fmt.Fprintln(w, "\nverdict: regressed")
	} else {
		fmt.Fprintln(w, "\nverdict: nothing regressed")
	}
}

// mdCode quotes a method name for a Markdown table cell.
func mdCode(s string) string { return "`" + strings.ReplaceAll(s, "|", `\|`) + "`" }

func writeDiffMarkdown(w io.Writer, d *report.DiffResult, pos []string, top int) {
	n := len(d.Regressions)
	for _, p := range d.New {
		if p.Regression {
			n++
		}
	}
	if d.Regressed() {
		fmt.Fprintf(w, "### msgtrace: %d regression", n)
		if n != 1 {
			fmt.Fprint(w, "s")
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintln(w, "### msgtrace: nothing regressed")
	}
	fmt.Fprintf(w, "\nBase `%s` (%d runs) against head `%s` (%d runs): %s.\n", pos[0], d.BaseRuns, pos[1], d.HeadRuns, diffRule(d))
	table := func(title string, es []report.DiffEntry) {
		if len(es) == 0 {
			return
		}
		fmt.Fprintf(w, "\n#### %s (%d)\n\n| method | metric | base / run | head / run | change | p (Holm) |\n|---|---|--:|--:|--:|--:|\n", title, len(es))
		for _, e := range es[:min(top, len(es))] {
			m := mdCode(engine.DisplayName(e.Method))
			if len(e.Via) > 0 {
				var vs []string
				for _, v := range e.Via {
					vs = append(vs, mdCode(engine.DisplayName(v)))
				}
				m += " via " + strings.Join(vs, ", ")
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", m, e.Metric, number(e.Metric, e.Base), number(e.Metric, e.Head), change(e), pval(e.PAdjusted))
		}
		if len(es) > top {
			fmt.Fprintf(w, "\n%d more not shown.\n", len(es)-top)
		}
	}
	table("Regressions", d.Regressions)
	table("Improvements", d.Improvements)
	table("Slower only through what they call (own time unchanged)", d.ThroughCallees)
	presence := func(title string, ps []report.PresenceEntry, runs int) {
		if len(ps) == 0 {
			return
		}
		fmt.Fprintf(w, "\n#### %s (%d)\n\n| method | self / run | calls / run | runs |\n|---|--:|--:|--:|\n", title, len(ps))
		for _, p := range ps[:min(top, len(ps))] {
			m := mdCode(engine.DisplayName(p.Method))
			if p.Regression {
				m += " **regression**"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %d/%d |\n", m, number("self", p.SelfNanos), number("calls", p.Calls), p.Runs, runs)
		}
		if len(ps) > top {
			fmt.Fprintf(w, "\n%d more not shown.\n", len(ps)-top)
		}
	}
	presence("New methods", d.New, d.HeadRuns)
	presence("Vanished methods", d.Vanished, d.BaseRuns)
}
