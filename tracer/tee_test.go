package tracer

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/internal/tracetest"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// teeOutput is one format's output and what its budget folded.
type teeOutput struct {
	out  []byte
	fold engine.FoldReport
}

// convertAlone converts the streams to each format on its own, and to a report on its own.
func convertAlone(t *testing.T, ins [][]byte, formats []string, opt engine.Options, m sink.Meta) (map[string]teeOutput, engine.Totals, []byte) {
	t.Helper()
	outs := map[string]teeOutput{}
	var tot engine.Totals
	for _, f := range formats {
		var b bytes.Buffer
		s := newSink(t, f, &b, m)
		tt, err := engine.ProcessStreams(inputs(ins), opt, s)
		if err != nil {
			t.Fatalf("%s alone: %v", f, err)
		}
		o := teeOutput{out: b.Bytes()}
		if r := engine.Folded(s); r != nil {
			o.fold = *r
		}
		outs[f], tot = o, tt
	}
	rep := report.NewReportSink(report.ReportOptions{BudgetNanos: 16e6, Top: 10})
	if _, err := engine.ProcessStreams(inputs(ins), opt, rep); err != nil {
		t.Fatalf("report alone: %v", err)
	}
	return outs, tot, reportJSON(t, rep)
}

func inputs(ins [][]byte) []engine.Input {
	var in []engine.Input
	for _, b := range ins {
		in = append(in, engine.Input{R: bytes.NewReader(b), Size: int64(len(b))})
	}
	return in
}

func reportJSON(t *testing.T, rep *report.ReportSink) []byte {
	t.Helper()
	b, err := json.Marshal(rep.Report())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// teeSame converts the streams through one Tee of the formats and a report, and checks that
// every output, fold report, the report and the totals are those of each converted alone.
func teeSame(t *testing.T, name string, ins [][]byte, formats []string, opt engine.Options, m sink.Meta) {
	t.Helper()
	want, wtot, wrep := convertAlone(t, ins, formats, opt, m)
	bufs := make([]bytes.Buffer, len(formats))
	var sinks []engine.Sink
	for i, f := range formats {
		sinks = append(sinks, newSink(t, f, &bufs[i], m))
	}
	rep := report.NewReportSink(report.ReportOptions{BudgetNanos: 16e6, Top: 10})
	tot, err := engine.ProcessStreams(inputs(ins), opt, engine.Tee(append(sinks, rep)...))
	if err != nil {
		t.Fatalf("%s: tee: %v", name, err)
	}
	if tot != wtot {
		t.Errorf("%s: tee totals %+v, alone %+v", name, tot, wtot)
	}
	for i, f := range formats {
		if !bytes.Equal(bufs[i].Bytes(), want[f].out) {
			t.Errorf("%s: %s: %d bytes through the tee, %d alone, not the same", name, f, bufs[i].Len(), len(want[f].out))
		}
		var fold engine.FoldReport
		if r := engine.Folded(sinks[i]); r != nil {
			fold = *r
		}
		if fold != want[f].fold {
			t.Errorf("%s: %s: folded %+v through the tee, %+v alone", name, f, fold, want[f].fold)
		}
	}
	if got := reportJSON(t, rep); !bytes.Equal(got, wrep) {
		t.Errorf("%s: the report through the tee is not the report alone", name)
	}
}

// TestTeeSameOutput: a Tee of every format and a report (what `msgtrace run` writes), read
// once, gives each output byte for byte as converting to it alone, with the same fold reports,
// report and totals: with and without filters on calls (the aggregates' trie filled by the
// aggregates' path beside pass 2, or by pass 2), with budgets that fold calls, a thread
// selection, threads the aggregates' path leaves to the generic one (orphans), several
// streams; and tees of the aggregates alone and of the timelines alone.
func TestTeeSameOutput(t *testing.T) {
	all := []string{"json", "perfetto", "speedscope", "pprof", "folded", "svg"}
	g := tracetest.Gen(t, tracetest.GenOpts{Seed: 31, PID: 1, Threads: 4, PerTh: 20_000, FrameEvents: 300, Line: tracetest.Line24MHz, Marks: true, OpenAfterFrame: 5})
	damaged := bytes.Clone(g.B)
	damaged[len(damaged)/2] ^= 0x40
	g2 := tracetest.Gen(t, tracetest.GenOpts{Seed: 32, PID: 2, Threads: 2, PerTh: 10_000, FrameEvents: 200, Line: tracetest.Line24MHz, OpenAfterFrame: 4})
	// calls lost without their marks: orphans, a thread the aggregates' path leaves to the
	// generic one
	r := rand.New(rand.NewSource(9))
	tick := uint64(10)
	evs, _ := tracetest.Runloop(r, 100, 30_000, 60, &tick, false)
	var lossy []stream.StreamEvent
	for i := 0; i < len(evs); i++ {
		if e := evs[i]; e.Depth > 0 && e.Depth < 4 && r.Intn(30) == 0 {
			i += r.Intn(3)
			continue
		}
		lossy = append(lossy, evs[i])
	}
	clean, _ := tracetest.Runloop(r, 101, 5_000, 60, &tick, true)
	orphans := tracetest.WriteThreads(t, r, [][]stream.StreamEvent{lossy, clean}, 200, true)

	every := engine.Options{MaxDepth: -1}
	folds := sink.Meta{TimeNanos: 1, Budget: 5_000}
	for _, c := range []struct {
		name string
		ins  [][]byte
		opt  engine.Options
		m    sink.Meta
	}{
		{"every call", [][]byte{damaged}, every, sink.Meta{TimeNanos: 1, Budget: -1}},
		{"budgets", [][]byte{damaged}, every, folds},
		{"two streams", [][]byte{g.B, g2.B}, every, folds},
		{"threads", [][]byte{g.B, g2.B}, engine.Options{MaxDepth: -1, Threads: "t1,2001"}, folds},
		{"orphans", [][]byte{orphans}, every, folds},
		{"max depth", [][]byte{damaged}, engine.Options{MaxDepth: 3}, folds},
		{"exclude", [][]byte{g.B}, engine.Options{MaxDepth: -1, Exclude: []string{"*[Class3 *]"}, MinNanos: 100}, folds},
	} {
		if _, tot, _ := convertAlone(t, c.ins, []string{"folded"}, c.opt, c.m); c.opt.Exclude != nil && tot.Kept == tot.Calls {
			t.Fatalf("%s: every call kept", c.name)
		}
		teeSame(t, c.name, c.ins, all, c.opt, c.m)
		teeSame(t, c.name+": aggregates", c.ins, []string{"svg", "pprof", "folded"}, c.opt, c.m)
		teeSame(t, c.name+": timelines", c.ins, []string{"speedscope", "json", "perfetto"}, c.opt, c.m)
	}
}
