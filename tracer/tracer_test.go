package tracer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// node is a call in a hand-built tree; rec turns a tree into records in the order calls end.
type node struct {
	cls, sel   uint64
	start, end uint64
	flags      uint64
	kids       []node
}

func (n node) records(depth uint64, out *[]stream.Record) {
	for _, k := range n.kids {
		k.records(depth+1, out)
	}
	*out = append(*out, stream.Record{Start: n.start, End: n.end, Class: n.cls | depth<<48 | n.flags<<60, Sel: n.sel})
}

const (
	clsFoo, clsFooMeta, clsBar = 0x1000, 0x2000, 0x3000
	selRun, selStep, selTiny   = 0x10, 0x20, 0x30
)

var testNames = []stream.NameEntry{
	{Key: clsFoo, Kind: stream.NameClass, Name: "Foo"}, {Key: clsFooMeta, Kind: stream.NameMetaclass, Name: "Foo"}, {Key: clsBar, Kind: stream.NameClass, Name: "Bar"},
	{Key: selRun, Kind: stream.NameSelector, Name: "run"}, {Key: selStep, Kind: stream.NameSelector, Name: "step:"}, {Key: selTiny, Kind: stream.NameSelector, Name: "tiny"},
}

// testTrace: main thread -[Foo run] [1000,101000] > 2x -[Bar step:] > -[Bar tiny]; +[Foo run];
// a worker thread with a call an exception unwound.
func testTrace(t testing.TB) []byte {
	main := []node{
		{cls: clsFoo, sel: selRun, start: 1000, end: 101000, kids: []node{
			{cls: clsBar, sel: selStep, start: 11000, end: 41000, kids: []node{
				{cls: clsBar, sel: selTiny, start: 16000, end: 21000},
			}},
			{cls: clsBar, sel: selStep, start: 51000, end: 91000},
		}},
		{cls: clsFooMeta, sel: selRun, start: 121000, end: 131000},
	}
	var recs []stream.Record
	for _, n := range main {
		n.records(0, &recs)
	}
	var buf bytes.Buffer
	w := stream.NewWriter(&buf, stream.Header{PID: 4242, TickNum: 1, TickDen: 1, BaseTick: 1000})
	w.WriteNames(testNames)
	w.WriteThread(stream.Thread{TID: 100, Main: true, Dropped: 3, Overflow: 1}, recs)
	var wrecs []stream.Record
	node{cls: clsBar, sel: selStep, start: 6000, end: 26000, flags: stream.FlagUnwound}.records(0, &wrecs)
	w.WriteThread(stream.Thread{TID: 101, Name: "worker"}, wrecs)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type chromeEvent struct {
	Ph, Name string
	Ts, Dur  float64
	Pid, Tid uint64
	Args     map[string]any
}

type chromeFile struct {
	TraceEvents []chromeEvent
	OtherData   map[string]uint64
}

func toJSON(t *testing.T, raw []byte, opt engine.Options) chromeFile {
	var out bytes.Buffer
	if _, err := engine.Process(bytes.NewReader(raw), opt, sink.NewChromeSink(&out)); err != nil {
		t.Fatal(err)
	}
	var f chromeFile
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, out.String())
	}
	return f
}

// calls imports the JSON as Perfetto does (perfettoImport) and returns the slices by name, as
// events with Ts and Dur in microseconds, the end event's args, and self_ns the self time.
func calls(f chromeFile) map[string][]chromeEvent {
	m := map[string][]chromeEvent{}
	sl, err := perfettoImport(f)
	if err != nil {
		panic(err)
	}
	for _, e := range sl {
		if strings.HasPrefix(e.Name, "[") { // a mark
			continue
		}
		e.Args["self_ns"] = float64(e.Self)
		m[e.Name] = append(m[e.Name], chromeEvent{Ph: "X", Name: e.Name, Ts: float64(e.Ts) / 1000, Dur: float64(e.Dur) / 1000,
			Pid: e.Pid, Tid: e.Tid, Args: e.Args})
	}
	return m
}

func TestChromeJSON(t *testing.T) {
	f := toJSON(t, testTrace(t), engine.Options{MaxDepth: -1})
	c := calls(f)
	foo := c["-[Foo run]"]
	if len(foo) != 1 || foo[0].Ts != 0 || foo[0].Dur != 100 || foo[0].Pid != 4242 || foo[0].Tid != 100 {
		t.Fatalf("-[Foo run]: %+v", foo)
	}
	if self := foo[0].Args["self_ns"].(float64); self != 30000 { // 100 - 30 - 40 µs
		t.Errorf("-[Foo run] self %v, want 30", self)
	}
	if len(c["-[Bar step:]"]) != 3 || len(c["+[Foo run]"]) != 1 || len(c["-[Bar tiny]"]) != 1 {
		t.Errorf("events: %v", c)
	}
	var unwound int
	for _, e := range c["-[Bar step:]"] {
		if e.Args["unwound"] == true {
			unwound++
		}
	}
	if unwound != 1 {
		t.Errorf("unwound events %d, want 1", unwound)
	}
	meta := map[string]bool{}
	for _, e := range f.TraceEvents {
		if e.Ph == "M" {
			meta[fmt.Sprint(e.Name, "=", e.Args["name"])] = true
		}
	}
	if !meta["thread_name=main"] || !meta["thread_name=worker"] || !meta["process_name=pid 4242"] {
		t.Errorf("metadata: %v", meta)
	}
	if f.OtherData["dropped_buffer_full"] != 3 || f.OtherData["untraced_stack_full"] != 1 || f.OtherData["calls"] != 6 {
		t.Errorf("otherData: %v", f.OtherData)
	}
}

// TestFilters: a dropped call's children attach to the nearest kept ancestor.
func TestFilters(t *testing.T) {
	raw := testTrace(t)
	// drop -[Bar step:]: -[Bar tiny] (5 µs) now belongs to -[Foo run]
	c := calls(toJSON(t, raw, engine.Options{MaxDepth: -1, Exclude: []string{"-[Bar step:]"}}))
	if len(c["-[Bar step:]"]) != 0 || c["-[Foo run]"][0].Args["self_ns"].(float64) != 95000 {
		t.Errorf("exclude: %v", c)
	}
	// shorter than 10 µs: -[Bar tiny] goes, the first -[Bar step:] keeps its 30 µs as self
	c = calls(toJSON(t, raw, engine.Options{MaxDepth: -1, MinNanos: 10000}))
	if len(c["-[Bar tiny]"]) != 0 || c["-[Bar step:]"][1].Args["self_ns"].(float64) != 30000 || c["-[Bar step:]"][1].Ts != 10 {
		t.Errorf("min duration: %v", c)
	}
	c = calls(toJSON(t, raw, engine.Options{MaxDepth: 0}))
	if len(c) != 3 || len(c["-[Bar tiny]"]) != 0 {
		t.Errorf("max depth 0: %v", c)
	}
	c = calls(toJSON(t, raw, engine.Options{MaxDepth: -1, Include: []string{"*[Bar *]"}}))
	if len(c) != 2 || len(c["-[Bar step:]"]) != 3 {
		t.Errorf("include: %v", c)
	}
	c = calls(toJSON(t, raw, engine.Options{MaxDepth: -1, Include: []string{"+[Foo *]"}}))
	if len(c) != 1 || len(c["+[Foo run]"]) != 1 {
		t.Errorf("include class methods: %v", c)
	}
	c = calls(toJSON(t, raw, engine.Options{MaxDepth: -1, Threads: "main"}))
	for _, es := range c {
		for _, e := range es {
			if e.Tid != 100 {
				t.Errorf("threads=main kept tid %d", e.Tid)
			}
		}
	}
	c = calls(toJSON(t, raw, engine.Options{MaxDepth: -1, Threads: "worker"}))
	if len(c) != 1 {
		t.Errorf("threads=worker: %v", c)
	}
}

func TestFolded(t *testing.T) {
	var out bytes.Buffer
	if _, err := engine.Process(bytes.NewReader(testTrace(t)), engine.Options{MaxDepth: -1, Exclude: []string{"-[Bar step:]"}}, sink.NewFoldedSink(&out)); err != nil {
		t.Fatal(err)
	}
	want := "main;+[Foo run] 10000\nmain;-[Foo run] 95000\nmain;-[Foo run];-[Bar tiny] 5000\nmain;[lost 3] 0\nmain;[overflow 1] 0\n"
	if out.String() != want {
		t.Fatalf("folded:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestPprof writes a profile, reads it back, and has `go tool pprof` print it.
func TestPprof(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "trace.pb.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Process(bytes.NewReader(testTrace(t)), engine.Options{MaxDepth: -1}, sink.NewPprofSink(f)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, _ := os.ReadFile(p)
	prof, err := profile.ParseData(b)
	if err != nil {
		t.Fatal(err)
	}
	var calls, self int64
	for _, s := range prof.Sample {
		calls += s.Value[0]
		self += s.Value[1]
		if len(s.Label["thread"]) != 1 || len(s.NumLabel["tid"]) != 1 {
			t.Errorf("sample without thread labels: %v", s)
		}
	}
	// 6 calls recorded, 3 lost and 1 past the shadow stack ("[lost 3]", "[overflow 1]")
	if calls != 10 || self != 100000+10000+20000 {
		t.Errorf("calls %d self %d", calls, self)
	}
	if len(prof.SampleType) != 2 || prof.SampleType[1].Type != "self" || prof.PeriodType == nil ||
		prof.DurationNanos != 130000 || prof.TimeNanos == 0 || len(prof.Mapping) != 1 || prof.Mapping[0].File == "" {
		t.Errorf("profile header: %v %v %d %d %v", prof.SampleType, prof.PeriodType, prof.DurationNanos, prof.TimeNanos, prof.Mapping)
	}
	for _, c := range []struct {
		args []string
		has  []string
		not  []string
	}{
		{[]string{"-top"}, []string{"-[Bar tiny]", "[unwound]"}, []string{"Main binary filename not available"}},
		{[]string{"-traces"}, []string{"-[Bar tiny]", "[lost 3]", "thread:  main", "tid:  100"}, nil},
		{[]string{"-top", "-tagfocus", "thread=worker"}, []string{"[unwound]", "-[Bar step:]"}, []string{"-[Foo run]"}},
		{[]string{"-top", "-sample_index=calls"}, []string{"[lost 3]"}, nil},
	} {
		out, err := exec.Command("go", append(append([]string{"tool", "pprof"}, c.args...), p)...).CombinedOutput()
		for _, h := range c.has {
			if err != nil || !strings.Contains(string(out), h) {
				t.Errorf("go tool pprof %v: no %q: %v\n%s", c.args, h, err, out)
			}
		}
		for _, h := range c.not {
			if strings.Contains(string(out), h) {
				t.Errorf("go tool pprof %v: %q\n%s", c.args, h, out)
			}
		}
	}
}

// TestCorrupted: every truncation and many flipped bytes give an error naming a byte offset
// inside the file, or a correct result; never a panic.
func TestCorrupted(t *testing.T) {
	raw := testTrace(t)
	for n := 0; n < len(raw); n++ {
		_, err := engine.Process(bytes.NewReader(raw[:n]), engine.Options{MaxDepth: -1}, sink.NewChromeSink(&bytes.Buffer{}))
		var re *stream.RawError
		if !errors.As(err, &re) || re.Offset > int64(n) || !strings.Contains(err.Error(), "byte offset") {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	for i := 0; i < len(raw); i++ {
		mut := bytes.Clone(raw)
		mut[i] ^= 0xff
		engine.Process(bytes.NewReader(mut), engine.Options{MaxDepth: -1}, sink.NewChromeSink(&bytes.Buffer{}))
	}
}

func FuzzProcess(f *testing.F) {
	f.Add(testTrace(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range []engine.Sink{sink.NewChromeSink(&bytes.Buffer{}), sink.NewFoldedSink(&bytes.Buffer{}), sink.NewPprofSink(&bytes.Buffer{})} {
			engine.Process(bytes.NewReader(b), engine.Options{MaxDepth: -1}, s)
		}
	})
}
