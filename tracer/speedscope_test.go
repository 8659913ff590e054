package tracer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
)

// speedscopeFile is the part of speedscope's file format (file-format-schema.json) written.
type speedscopeFile struct {
	Schema   string `json:"$schema"`
	Exporter string
	Name     string
	Shared   struct{ Frames []struct{ Name string } }
	Profiles []struct {
		Type, Name, Unit     string
		StartValue, EndValue uint64
		Events               []struct {
			Type  string
			Frame int
			At    uint64
		}
	}
}

// TestSpeedscopeFile: one evented profile per thread in nanoseconds, events in time order,
// every close matching the open on top of the stack, frames shared and named once, open calls
// ending at the end of the trace with "[running]", unwound calls and losses as frames.
func TestSpeedscopeFile(t *testing.T) {
	ts := append(synthTrace(9, 20000, 500, "", "worker"), synthEdge())
	var out bytes.Buffer
	if _, err := engine.Process(bytes.NewReader(writeSynth(t, ts)), engine.Options{MaxDepth: -1}, sink.NewSpeedscopeSink(&out, sink.Meta{Path: "/bin/app"})); err != nil {
		t.Fatal(err)
	}
	var f speedscopeFile
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	if f.Schema != "https://www.speedscope.app/file-format-schema.json" || f.Name != "app" || len(f.Profiles) != 3 {
		t.Fatalf("header: %q %q, %d profiles", f.Schema, f.Name, len(f.Profiles))
	}
	names := map[string]bool{}
	for _, fr := range f.Shared.Frames {
		if names[fr.Name] {
			t.Errorf("frame %q twice", fr.Name)
		}
		names[fr.Name] = true
	}
	wantNames := []string{"main (tid 1000)", "worker", "hang"}
	for i, p := range f.Profiles {
		if p.Type != "evented" || p.Unit != "nanoseconds" || p.Name != wantNames[i] {
			t.Errorf("profile %d: %s %s %q", i, p.Type, p.Unit, p.Name)
		}
		var st []int
		last := p.StartValue
		calls := 0
		for _, e := range p.Events {
			if e.At < last || e.Frame < 0 || e.Frame >= len(f.Shared.Frames) {
				t.Fatalf("%s: event %+v out of order or frame", p.Name, e)
			}
			last = e.At
			switch e.Type {
			case "O":
				st = append(st, e.Frame)
				calls++
			case "C":
				if len(st) == 0 || st[len(st)-1] != e.Frame {
					t.Fatalf("%s: close of %d does not match the open frames %v", p.Name, e.Frame, st)
				}
				st = st[:len(st)-1]
			}
		}
		if len(st) != 0 || last != p.EndValue {
			t.Errorf("%s: %d frames left open, last event %d, end %d", p.Name, len(st), last, p.EndValue)
		}
		if i < 2 && calls != 10000 {
			t.Errorf("%s: %d opens, want 10000", p.Name, calls)
		}
	}
	// the hang thread, in order
	var seq []string
	for _, e := range f.Profiles[2].Events {
		seq = append(seq, e.Type+" "+f.Shared.Frames[e.Frame].Name)
	}
	want := "O -[App run],O -[Worker step],O [unwound],C [unwound],C -[Worker step],C -[App run]," +
		"O -[App run],O [running],C [running],O -[Cell value],C -[Cell value],O [running],C [running]," +
		"O -[Worker fib:],O [running],C [running],C -[Worker fib:],C -[App run],O [lost 5],C [lost 5]"
	if strings.Join(seq, ",") != want {
		t.Errorf("hang thread:\n%s\nwant\n%s", strings.Join(seq, ","), want)
	}
}

// TestFoldedThreads: one root frame per thread, the calls above it; open calls' time on
// "[running]", unwound calls' on "[unwound]", losses as "[lost N]" (nanoseconds).
func TestFoldedThreads(t *testing.T) {
	var out bytes.Buffer
	edge := synthEdge()
	if _, err := engine.Process(bytes.NewReader(writeSynth(t, []synthThread{edge})), engine.Options{MaxDepth: -1}, sink.NewFoldedSink(&out)); err != nil {
		t.Fatal(err)
	}
	n := func(a, b uint64) uint64 { return ns(b) - ns(a) }
	want := strings.Join([]string{
		"hang;-[App run] " + itoa(n(10, 100)-n(20, 40)),
		"hang;-[App run];-[Cell value] " + itoa(n(110, 130)),
		"hang;-[App run];-[Worker fib:];[running] " + itoa(n(150, 400)),
		"hang;-[App run];-[Worker step];[unwound] " + itoa(n(20, 40)),
		"hang;-[App run];[running] " + itoa(n(100, 400)-n(110, 130)-n(150, 400)),
		"hang;[lost 5] 0",
	}, "\n") + "\n"
	if out.String() != want {
		t.Errorf("folded:\n%s\nwant:\n%s", out.String(), want)
	}
}

func itoa(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
