package tracer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// importedSlice is a slice as Perfetto's JSON importer makes it: times in ns, Dur -1 for a
// slice that did not end, Depth its nesting on the thread's track.
type importedSlice struct {
	Name     string
	Pid, Tid uint64
	Ts, Dur  int64
	Depth    int
	Instant  bool
	Args     map[string]any
	Parent   int   // index of the enclosing slice, -1 for none
	Self     int64 // Dur minus the children's
}

// perfettoTs converts a JSON time in microseconds to ns as Perfetto does
// (json_trace_tokenizer.cc CoerceToTs): whole numbers times 1000, others llround(v * 1000).
func perfettoTs(v float64) int64 {
	if v == math.Trunc(v) {
		return int64(v) * 1000
	}
	return int64(math.Round(v * 1000))
}

// perfettoImport applies Perfetto's documented JSON import rules to a trace:
//   - events are sorted by time; at equal times "E" events come first, then "X" events longest
//     first, then the rest in file order (trace_sorter.h, KeyForType);
//   - slices are closed-open: a slice ending at t is over before anything starting at t;
//   - "B" opens a slice on the thread's stack, "E" closes the top one, which must have its name;
//     "X" and thread-scoped "i" (a zero-length slice) nest in what is open and must end before
//     it does: anything else is an overlap, which Perfetto moves off the thread's track;
//   - a "B" never ended is a slice that did not end.
//
// It returns an error where Perfetto would report an import error or move a slice away.
func perfettoImport(f chromeFile) ([]importedSlice, error) {
	type ev struct {
		chromeEvent
		ts, dur int64
		key     int64
		i       int
	}
	var evs []ev
	for i, e := range f.TraceEvents {
		switch e.Ph {
		case "B", "E", "X", "i":
		default:
			continue
		}
		x := ev{chromeEvent: e, ts: perfettoTs(e.Ts), dur: perfettoTs(e.Dur), i: i, key: math.MaxInt64}
		switch e.Ph {
		case "E":
			x.key = math.MinInt64
		case "X":
			x.key = math.MaxInt64 - x.dur
		}
		evs = append(evs, x)
	}
	sort.SliceStable(evs, func(a, b int) bool {
		if evs[a].ts != evs[b].ts {
			return evs[a].ts < evs[b].ts
		}
		return evs[a].key < evs[b].key
	})
	type open struct {
		idx int   // in out
		end int64 // for X; -1 for B
	}
	stacks := map[[2]uint64][]open{}
	var out []importedSlice
	for _, e := range evs {
		k := [2]uint64{e.Pid, e.Tid}
		st := stacks[k]
		// closed-open: complete slices that ended by now are over
		for len(st) > 0 && st[len(st)-1].end >= 0 && st[len(st)-1].end <= e.ts {
			st = st[:len(st)-1]
		}
		switch e.Ph {
		case "B", "X", "i":
			end := int64(-1)
			if e.Ph == "X" {
				end = e.ts + e.dur
			}
			if e.Ph == "i" {
				end = e.ts
			}
			if len(st) > 0 && st[len(st)-1].end >= 0 && end > st[len(st)-1].end {
				return out, fmt.Errorf("event %d %s [%d,%d] overlaps %s", e.i, e.Name, e.ts, end, out[st[len(st)-1].idx].Name)
			}
			if len(st) > 0 && end < 0 && st[len(st)-1].end >= 0 {
				return out, fmt.Errorf("event %d: B %s inside a complete event", e.i, e.Name)
			}
			args := map[string]any{}
			for a, v := range e.Args {
				args[a] = v
			}
			parent := -1
			if len(st) > 0 {
				parent = st[len(st)-1].idx
			}
			out = append(out, importedSlice{Name: e.Name, Pid: e.Pid, Tid: e.Tid, Ts: e.ts, Dur: -1, Depth: len(st), Instant: e.Ph == "i", Args: args, Parent: parent})
			if e.Ph != "B" {
				out[len(out)-1].Dur = end - e.ts
			}
			if e.Ph == "i" {
				break // zero-length: over at once
			}
			st = append(st, open{len(out) - 1, end})
		case "E":
			if len(st) == 0 || st[len(st)-1].end >= 0 {
				return out, fmt.Errorf("event %d: E %s with nothing open", e.i, e.Name)
			}
			s := &out[st[len(st)-1].idx]
			if s.Name != e.Name {
				return out, fmt.Errorf("event %d: E %s ends %s", e.i, e.Name, s.Name)
			}
			s.Dur = e.ts - s.Ts
			for a, v := range e.Args {
				s.Args[a] = v
			}
			st = st[:len(st)-1]
		}
		stacks[k] = st
	}
	for i := range out {
		out[i].Self = out[i].Dur
	}
	for _, s := range out {
		if s.Parent >= 0 && s.Dur > 0 {
			out[s.Parent].Self -= s.Dur
		}
	}
	return out, nil
}

// TestJSONPerfettoRules converts traces full of touching calls, calls at their parent's tick,
// calls of no ticks and equal-bounds recursion (a 24 MHz counter) to JSON, imports it under
// Perfetto's rules, and checks every call comes back with its exact times, its parent and no
// import error; and that times are written so that Perfetto's µs -> ns rounding is exact.
func TestJSONPerfettoRules(t *testing.T) {
	ts := synthTrace(7, 20000, 400, "", "worker", "com.apple.root.default-qos")
	raw := writeSynth(t, ts)
	var out bytes.Buffer
	if _, err := engine.Process(bytes.NewReader(raw), engine.Options{MaxDepth: -1}, sink.NewChromeSink(&out)); err != nil {
		t.Fatal(err)
	}
	// every time has exactly three decimals, so it is integer nanoseconds
	var loose struct {
		TraceEvents []map[string]json.RawMessage
	}
	if err := json.Unmarshal(out.Bytes(), &loose); err != nil {
		t.Fatal(err)
	}
	for _, e := range loose.TraceEvents {
		if ts, ok := e["ts"]; ok {
			s := string(ts)
			if i := strings.IndexByte(s, '.'); i < 0 || len(s)-i != 4 {
				t.Fatalf("ts %s is not microseconds with three decimals", s)
			}
		}
		if args, ok := e["args"]; ok && e["ph"] != nil && string(e["ph"]) == `"B"` {
			t.Fatalf("a B event has args %s: they would split the method in speedscope", args)
		}
	}
	var f chromeFile
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	got, err := perfettoImport(f)
	if err != nil {
		t.Fatal(err)
	}
	// expected slices, per thread in pre-order: a zero-length call at the tick its parent ends
	// is, closed-open, no longer inside it: it sits with the nearest ancestor still open.
	type want struct {
		name  string
		ts    int64
		dur   int64
		depth int
	}
	byTid := map[uint64][]importedSlice{}
	for _, s := range got {
		byTid[s.Tid] = append(byTid[s.Tid], s)
	}
	for _, st := range ts {
		var wants []want
		var walk func(c *synthCall, anc []*synthCall)
		walk = func(c *synthCall, anc []*synthCall) {
			s, e := int64(ns(c.start)), int64(ns(c.end))
			d := len(anc)
			if s == e {
				for d > 0 && int64(ns(anc[d-1].end)) <= s {
					d--
				}
			}
			wants = append(wants, want{synthMethods[c.name].name, s, e - s, d})
			for _, k := range c.kids {
				walk(k, append(anc, c))
			}
		}
		for _, r := range st.roots {
			walk(r, nil)
		}
		gs := byTid[st.th.TID]
		// Perfetto orders by time: compare as a multiset keyed by everything
		key := func(n string, ts, dur int64, d int) string { return fmt.Sprintf("%d %d %d %s", ts, dur, d, n) }
		var a, b []string
		for _, w := range wants {
			a = append(a, key(w.name, w.ts, w.dur, w.depth))
		}
		for _, g := range gs {
			b = append(b, key(g.Name, g.Ts, g.Dur, g.Depth))
		}
		sort.Strings(a)
		sort.Strings(b)
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			for i := range min(len(a), len(b)) {
				if a[i] != b[i] {
					t.Fatalf("thread %d: %d slices, want %d; first difference: got %q want %q", st.th.TID, len(b), len(a), b[i], a[i])
				}
			}
			t.Fatalf("thread %d: %d slices, want %d", st.th.TID, len(b), len(a))
		}
	}
}

// TestJSONOpenUnwoundMarks: an unwound call says so on its end, losses are instants and a
// counter, the names are the program's and the threads'.
func TestJSONOpenUnwoundMarks(t *testing.T) {
	var out bytes.Buffer
	s := sink.NewChromeSink(&out)
	s.Meta = sink.Meta{Path: "/usr/bin/demoapp"}
	if _, err := engine.Process(bytes.NewReader(testTrace(t)), engine.Options{MaxDepth: -1}, s); err != nil {
		t.Fatal(err)
	}
	var f chromeFile
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range f.TraceEvents {
		switch e.Ph {
		case "M":
			seen = append(seen, fmt.Sprint(e.Name, "=", e.Args["name"], e.Args["sort_index"]))
		case "i", "C":
			seen = append(seen, fmt.Sprint(e.Ph, " ", e.Name, " ", e.Args))
		case "E":
			if e.Args["unwound"] == true {
				seen = append(seen, "unwound "+e.Name)
			}
		}
	}
	want := []string{
		"process_name=demoapp<nil>", "thread_name=main<nil>", "thread_sort_index=<nil> -1",
		"i [lost 3] map[count:3 dur_ns:0 kind:lost]", "C lost calls map[main:3]",
		"i [overflow 1] map[count:1 dur_ns:0 kind:overflow]", "C lost calls map[main:4]",
		"thread_name=worker<nil>", "unwound -[Bar step:]",
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("got  %q\nwant %q", seen, want)
	}
}

// TestJSONEndTimes: an end gets self_ns and dur_ns exactly when a begin of the same name is at
// its time (written in one pass once the time moves on), in each form its args take (none,
// unwound, folded calls), among several ends at one time, across the output's blocks.
func TestJSONEndTimes(t *testing.T) {
	var out bytes.Buffer
	s := sink.NewChromeSink(&out)
	ts := s.Needs().Tree
	th := &stream.Thread{TID: 7, Name: "t"}
	if err := ts.BeginThread(&stream.Header{PID: 1}, th); err != nil {
		t.Fatal(err)
	}
	call := func(name string, start, dur uint64, flags int, folded uint64) *engine.Call {
		return &engine.Call{Name: name, StartNanos: start, DurNanos: dur, SelfNanos: dur - 1, Flags: flags, Folded: folded, Thread: th}
	}
	leaf := func(c *engine.Call) {
		if err := ts.Enter(c, 1); err != nil {
			t.Fatal(err)
		}
		if err := ts.Exit(c, 1); err != nil {
			t.Fatal(err)
		}
	}
	root := call("root", 0, 1e9, 0, 0)
	if err := ts.Enter(root, 0); err != nil {
		t.Fatal(err)
	}
	// pairs of siblings, the first ending where the second begins; then filler, so that the
	// output spans several blocks
	at := uint64(1000)
	for i := 0; i < 5000; i++ {
		for _, p := range []struct {
			a, b          string
			flags         int
			folded        uint64
			nestedTouches bool
		}{
			{"a", "a", 0, 0, false}, {"u", "u", stream.FlagUnwound, 0, false}, {"f", "f", 0, 3, false},
			{"fu", "fu", stream.FlagUnwound, 2, false}, {"x", "y", 0, 0, false}, {"xu", "yu", stream.FlagUnwound, 4, false},
			{"n", "n", 0, 0, true},
		} {
			if p.nestedTouches { // two ends at one time (a call and its last child), then a begin of the child's name
				outer := call("outer", at, 20, 0, 0)
				ts.Enter(outer, 1)
				inner := call(p.a, at+10, 10, 0, 0)
				ts.Enter(inner, 2)
				ts.Exit(inner, 2)
				ts.Exit(outer, 1)
			} else {
				leaf(call(p.a, at, 20, p.flags, p.folded))
			}
			leaf(call(p.b, at+20, 5, 0, 0))
			at += 100
		}
	}
	if err := ts.Exit(root, 0); err != nil {
		t.Fatal(err)
	}
	if err := ts.EndThread(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(engine.Totals{}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []json.RawMessage `json:"traceEvents"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	want := map[string]string{
		"a":     `{"ph":"E","name":"a","ts":%s,"pid":1,"tid":7,"args":{"self_ns":19,"dur_ns":20}}`,
		"u":     `{"ph":"E","name":"u","ts":%s,"pid":1,"tid":7,"args":{"self_ns":19,"dur_ns":20,"unwound":true}}`,
		"f":     `{"ph":"E","name":"f","ts":%s,"pid":1,"tid":7,"args":{"folded_calls":3,"self_ns":19,"dur_ns":20}}`,
		"fu":    `{"ph":"E","name":"fu","ts":%s,"pid":1,"tid":7,"args":{"folded_calls":2,"self_ns":19,"dur_ns":20,"unwound":true}}`,
		"x":     `{"ph":"E","name":"x","ts":%s,"pid":1,"tid":7}`,
		"xu":    `{"ph":"E","name":"xu","ts":%s,"pid":1,"tid":7,"args":{"folded_calls":4,"unwound":true}}`,
		"n":     `{"ph":"E","name":"n","ts":%s,"pid":1,"tid":7,"args":{"self_ns":9,"dur_ns":10}}`,
		"outer": `{"ph":"E","name":"outer","ts":%s,"pid":1,"tid":7}`,
	}
	seen := map[string]int{}
	for _, raw := range doc.TraceEvents {
		var e struct {
			Ph, Name string
			Ts       json.Number
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		w, ok := want[e.Name]
		if e.Ph != "E" || !ok || strings.HasSuffix(string(e.Ts), "25") { // (the second of a pair ends at 25)
			continue
		}
		seen[e.Name]++
		if w = fmt.Sprintf(w, e.Ts); string(raw) != w {
			t.Fatalf("end of %s:\n%s\nwant\n%s", e.Name, raw, w)
		}
	}
	for n := range want {
		if seen[n] != 5000 {
			t.Errorf("%d ends of %s, want 5000", seen[n], n)
		}
	}
}
