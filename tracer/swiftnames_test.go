package tracer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/report"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

const clsSwift, clsSwiftMeta, clsPrivate = 0x4000, 0x5000, 0x6000

// swiftTrace: -[_TtC11ApertureCLI4Once run] > +[_TtCs12_SwiftObject run] >
// -[_TtC13SwiftLintCoreP33_C50808BC48225F2DD91FDECC9BB249EE5Cache step:], then -[Foo run].
func swiftTrace(t testing.TB) []byte {
	main := []node{
		{cls: clsSwift, sel: selRun, start: 1000, end: 101000, kids: []node{
			{cls: clsSwiftMeta, sel: selRun, start: 11000, end: 41000, kids: []node{
				{cls: clsPrivate, sel: selStep, start: 16000, end: 21000},
			}},
		}},
		{cls: clsFoo, sel: selRun, start: 121000, end: 131000},
	}
	var recs []stream.Record
	for _, n := range main {
		n.records(0, &recs)
	}
	var buf bytes.Buffer
	w := stream.NewWriter(&buf, stream.Header{PID: 4242, TickNum: 1, TickDen: 1, BaseTick: 1000})
	w.WriteNames(append(testNames[:len(testNames):len(testNames)],
		stream.NameEntry{Key: clsSwift, Kind: stream.NameClass, Name: "_TtC11ApertureCLI4Once"},
		stream.NameEntry{Key: clsSwiftMeta, Kind: stream.NameMetaclass, Name: "_TtCs12_SwiftObject"},
		stream.NameEntry{Key: clsPrivate, Kind: stream.NameClass, Name: "_TtC13SwiftLintCoreP33_C50808BC48225F2DD91FDECC9BB249EE5Cache"}))
	w.WriteThread(stream.Thread{TID: 100, Main: true}, recs)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const (
	onceRun    = "-[_TtC11ApertureCLI4Once run]"
	onceRunD   = "-[ApertureCLI.Once run]"
	objRun     = "+[_TtCs12_SwiftObject run]"
	objRunD    = "+[Swift._SwiftObject run]"
	cacheStep  = "-[_TtC13SwiftLintCoreP33_C50808BC48225F2DD91FDECC9BB249EE5Cache step:]"
	cacheStepD = "-[SwiftLintCore.(Cache in _C50808BC) step:]"
)

// TestSwiftNamesShown: every output shows a Swift class's methods demangled, keeps the runtime
// name where it identifies the method (the Chrome JSON's begin args, pprof's system names), and
// a pattern in either form selects them.
func TestSwiftNamesShown(t *testing.T) {
	raw := swiftTrace(t)

	var out bytes.Buffer
	if _, err := engine.Process(bytes.NewReader(raw), engine.Options{MaxDepth: -1}, sink.NewChromeSink(&out)); err != nil {
		t.Fatal(err)
	}
	var f chromeFile
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, out.String())
	}
	objc := map[string]any{}
	for _, e := range f.TraceEvents {
		if e.Ph == "B" {
			objc[e.Name] = e.Args["objc"]
		}
	}
	for d, m := range map[string]any{onceRunD: onceRun, objRunD: objRun, cacheStepD: cacheStep, "-[Foo run]": nil} {
		if got, ok := objc[d]; !ok || got != m {
			t.Errorf("JSON begin %s: args.objc %v (present %v), want %v", d, got, ok, m)
		}
	}
	if strings.Contains(out.String(), `"name":"-[_Tt`) {
		t.Errorf("JSON names a call by its runtime name:\n%s", out.String())
	}
	c := calls(f)
	if len(c[onceRunD]) != 1 || len(c[cacheStepD]) != 1 {
		t.Errorf("slices: %v", c)
	}

	out.Reset()
	if _, err := engine.Process(bytes.NewReader(raw), engine.Options{MaxDepth: -1}, sink.NewFoldedSink(&out)); err != nil {
		t.Fatal(err)
	}
	want := "main;" + onceRunD + " 70000\nmain;" + onceRunD + ";" + objRunD + " 25000\nmain;" + onceRunD + ";" + objRunD + ";" + cacheStepD + " 5000\nmain;-[Foo run] 10000\n"
	if out.String() != want {
		t.Errorf("folded:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	if _, err := engine.Process(bytes.NewReader(raw), engine.Options{MaxDepth: -1}, sink.NewPprofSink(&out)); err != nil {
		t.Fatal(err)
	}
	prof, err := profile.ParseData(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	sys := map[string]string{}
	for _, fn := range prof.Function {
		sys[fn.Name] = fn.SystemName
	}
	for d, m := range map[string]string{onceRunD: onceRun, objRunD: objRun, cacheStepD: cacheStep, "-[Foo run]": "-[Foo run]"} {
		if sys[d] != m {
			t.Errorf("pprof function %s: system name %q, want %q", d, sys[d], m)
		}
	}

	for _, format := range []string{"speedscope", "perfetto", "svg"} {
		out.Reset()
		s, err := NewSink(format, &out, sink.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Process(bytes.NewReader(raw), engine.Options{MaxDepth: -1}, s); err != nil {
			t.Fatal(err)
		}
		b := out.Bytes()
		if format == "perfetto" {
			b, _ = pfInflate(t, b)
		}
		for _, d := range []string{"ApertureCLI.Once run", "Swift._SwiftObject run", "SwiftLintCore.(Cache in _C50808BC) step:"} {
			if !bytes.Contains(b, []byte(d)) {
				t.Errorf("%s: no %q", format, d)
			}
		}
		if bytes.Contains(b, []byte("_TtC11ApertureCLI4Once")) {
			t.Errorf("%s shows a runtime name", format)
		}
	}

	// patterns in either form
	for _, inc := range [][]string{{"-[ApertureCLI.* *]"}, {"-[_TtC11ApertureCLI* *]"}, {onceRunD}, {onceRun}} {
		c := calls(toJSON(t, raw, engine.Options{MaxDepth: -1, Include: inc}))
		if len(c) != 1 || len(c[onceRunD]) != 1 {
			t.Errorf("include %v: %v", inc, c)
		}
	}
	for _, exc := range [][]string{{"*[SwiftLintCore.* *]"}, {"*[Swift.* *]", "-[*(Cache in *) *]"}, {"*[_TtC13SwiftLintCore* *]"}} {
		c := calls(toJSON(t, raw, engine.Options{MaxDepth: -1, Exclude: exc}))
		if len(c[cacheStepD]) != 0 || len(c[onceRunD]) != 1 {
			t.Errorf("exclude %v: %v", exc, c)
		}
	}
}

// TestSwiftNamesInReport: report JSON keys methods by their runtime names and adds how people
// write them; a stack reads as people write it.
func TestSwiftNamesInReport(t *testing.T) {
	s := report.NewReportSink(report.ReportOptions{})
	if _, err := engine.Process(bytes.NewReader(swiftTrace(t)), engine.Options{MaxDepth: -1}, s); err != nil {
		t.Fatal(err)
	}
	r := s.Report()
	seen := map[string]string{}
	for _, m := range r.Methods.BySelf {
		seen[m.Method] = m.Display
	}
	for m, d := range map[string]string{onceRun: onceRunD, cacheStep: cacheStepD, "-[Foo run]": ""} {
		if got, ok := seen[m]; !ok || got != d {
			t.Errorf("report method %s: display %q (present %v), want %q", m, got, ok, d)
		}
	}
	if got := report.StackString([]string{onceRun, objRun, "-[Foo run]"}); got != onceRunD+" > "+objRunD+" > -[Foo run]" {
		t.Errorf("StackString: %q", got)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"method":"`+cacheStep+`"`)) || !bytes.Contains(b, []byte(`"display":"`+cacheStepD+`"`)) {
		t.Errorf("report JSON:\n%s", b)
	}
}
