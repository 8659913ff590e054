package tracer

import (
	"bytes"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/sink"
)

// TestRegistry: the one format list is consistent: names, extensions and run's flags unique;
// each extension names its own format back (FormatFor, WithPID), each format makes its sink,
// timelines and only they have a budget, and the help text names every extension.
func TestRegistry(t *testing.T) {
	names, exts, flags := map[string]bool{}, map[string]string{}, map[string]bool{}
	help := FormatsHelp()
	for _, f := range Registry {
		if names[f.Name] || f.Name == "" || f.Name == "stream" || f.Help == "" || len(f.Extensions) == 0 {
			t.Errorf("%q: a duplicate or incomplete entry", f.Name)
		}
		names[f.Name] = true
		if f.RunFlag != "" {
			if flags[f.RunFlag] {
				t.Errorf("%s: run flag --%s twice", f.Name, f.RunFlag)
			}
			flags[f.RunFlag] = true
		}
		if (f.Kind == Timeline) != (f.DefaultBudget > 0) || DefaultBudget(f.Name) != f.DefaultBudget {
			t.Errorf("%s: kind %v, budget %d", f.Name, f.Kind, f.DefaultBudget)
		}
		for _, e := range f.Extensions {
			if o, ok := exts[e]; ok || e == StreamExtension || !strings.HasPrefix(e, ".") {
				t.Errorf("%s: extension %s (also %s)", f.Name, e, o)
			}
			exts[e] = f.Name
			for _, p := range []string{"out" + e, "OUT" + strings.ToUpper(e), "a/b.c" + e} {
				if got, err := FormatFor(p); got != f.Name || err != nil {
					t.Errorf("FormatFor(%q) = %q, %v; want %s", p, got, err, f.Name)
				}
				if got, _ := FormatFor(WithPID(p, 42)); got != f.Name || !strings.Contains(WithPID(p, 42), ".42") {
					t.Errorf("WithPID(%q) = %q: %q", p, WithPID(p, 42), got)
				}
				if CheckOutputName(p, f.Name) != nil {
					t.Errorf("CheckOutputName(%q, %s) refused", p, f.Name)
				}
			}
			if !strings.Contains(help, e) || !strings.Contains(KnownExtensions(), e+" ("+f.Name+")") {
				t.Errorf("%s: the help text or the messages do not name %s", f.Name, e)
			}
		}
		var b bytes.Buffer
		if s, err := NewSink(f.Name, &b, sink.Meta{}); err != nil || s == nil {
			t.Errorf("NewSink(%s): %v", f.Name, err)
		}
		if Extension(f.Name) != f.Extensions[0] || FormatNamed(f.Name) == nil {
			t.Errorf("%s: Extension %q", f.Name, Extension(f.Name))
		}
	}
	if strings.Join(Formats, ",") != "json,perfetto,speedscope,pprof,folded,svg" {
		t.Errorf("Formats %v", Formats)
	}
	if _, err := NewSink("stream", nil, sink.Meta{}); err == nil || Extension("xml") != "" || FormatNamed("xml") != nil {
		t.Error("a name no format has is known")
	}
}
