package agent

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnvDefaults(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"TMPDIR": "/var/tmp/x"}), 42)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Out: "/var/tmp/x/msgtrace-%p.json", Format: "json", MaxDepth: -1, Threads: "all", BufferMB: DefaultBufferMB, Methods: []string{"app"}, CPU: true, Flows: true}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
}

func TestFromEnvValues(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		"MSGTRACE_OUT": "/tmp/a.pb.gz", "MSGTRACE_MIN_US": "2.5", "MSGTRACE_MAX_DEPTH": "3",
		"MSGTRACE_INCLUDE": "-[UIView *], +[NSObject new]", "MSGTRACE_EXCLUDE": "*[RAC* *]",
		"MSGTRACE_THREADS": "main,worker-1", "MSGTRACE_START": "paused", "MSGTRACE_BUFFER_MB": "64",
		"MSGTRACE_FULL": "drop", "MSGTRACE_KEEP_STREAM": "1", "MSGTRACE_CPU": " 0 ", "MSGTRACE_FLOWS": " 0",
		"MSGTRACE_METHODS": "Calc*, libgnustep-base.so*", "MSGTRACE_CAPTURE": "Methods",
	}), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Out: "/tmp/a.pb.gz", Format: "pprof", MinUS: 2.5, MaxDepth: 3,
		Include: []string{"-[UIView *]", "+[NSObject new]"}, Exclude: []string{"*[RAC* *]"},
		Threads: "main,worker-1", Paused: true, BufferMB: 64, Drop: true, KeepStream: true,
		Methods: []string{"Calc*", "libgnustep-base.so*"}, Capture: "methods"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
	o := c.options()
	if o.MinNanos != 2500 || o.MaxDepth != 3 || len(o.Include) != 2 || o.Threads != "main,worker-1" {
		t.Errorf("options %+v", o)
	}
	// An explicit format wins over the extension; the default name follows the format.
	c, _ = FromEnv(env(map[string]string{"MSGTRACE_OUT": "/tmp/a.json", "MSGTRACE_FORMAT": "folded"}), 1)
	if c.Format != "folded" {
		t.Errorf("format %q", c.Format)
	}
	c, _ = FromEnv(env(map[string]string{"MSGTRACE_FORMAT": "STREAM", "TMPDIR": "/t"}), 7)
	if c.Format != "stream" || c.Out != "/t/msgtrace-%p.mtrace" || c.StreamPattern() != c.Out {
		t.Errorf("stream default: %+v", c)
	}
	c, _ = FromEnv(env(map[string]string{"MSGTRACE_OUT": "/t/run-%p-%h.json"}), 7)
	if c.Format != "json" || c.StreamPattern() != "/t/run-%p-%h.json.mtrace" {
		t.Errorf("pattern: %+v", c)
	}
	// any name goes when the format is said; the budget
	c, err = FromEnv(env(map[string]string{"MSGTRACE_OUT": "/tmp/a.txt", "MSGTRACE_FORMAT": "folded", "MSGTRACE_MAX_CALLS": "5000"}), 1)
	if err != nil || c.Format != "folded" || c.Budget != 5000 {
		t.Errorf("named .txt: %+v %v", c, err)
	}
	if c, err = FromEnv(env(map[string]string{"MSGTRACE_MAX_CALLS": " All"}), 1); err != nil || c.Budget != -1 {
		t.Errorf("budget all: %+v %v", c, err)
	}
	c, _ = FromEnv(env(map[string]string{"MSGTRACE_METHODS": " ALL "}), 1)
	if !reflect.DeepEqual(c.Methods, []string{"all"}) {
		t.Errorf("methods all: %q", c.Methods)
	}
	// every format from its extension, and back to its default name
	for out, format := range map[string]string{"/t/a.pftrace": "perfetto", "/t/a.speedscope.json": "speedscope",
		"/t/a.svg": "svg", "/t/a.folded": "folded", "/t/a.pb.gz": "pprof", "/t/a.json": "json", "/t/a.mtrace": "stream"} {
		c, err := FromEnv(env(map[string]string{"MSGTRACE_OUT": out}), 1)
		if err != nil || c.Format != format {
			t.Errorf("%s: format %q, %v", out, c.Format, err)
		}
		c, err = FromEnv(env(map[string]string{"MSGTRACE_FORMAT": format, "TMPDIR": "/t"}), 9)
		if want := "/t/msgtrace-%p" + out[len("/t/a"):]; err != nil || c.Out != want {
			t.Errorf("%s: default name %q, want %q (%v)", format, c.Out, want, err)
		}
	}
}

// Every bad value is one error naming the variable and the value.
func TestFromEnvBad(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{"MSGTRACE_FORMAT", "xml"},
		{"MSGTRACE_MIN_US", "abc"},
		{"MSGTRACE_MIN_US", "-1"},
		{"MSGTRACE_MIN_US", "NaN"},
		{"MSGTRACE_MAX_DEPTH", "-2"},
		{"MSGTRACE_MAX_DEPTH", "1.5"},
		{"MSGTRACE_INCLUDE", "UIView"},
		{"MSGTRACE_EXCLUDE", "-[A b],plain"},
		{"MSGTRACE_THREADS", ","},
		{"MSGTRACE_START", "yes"},
		{"MSGTRACE_BUFFER_MB", "0"},
		{"MSGTRACE_BUFFER_MB", "99999"},
		{"MSGTRACE_BUFFER_MB", "8MB"},
		{"MSGTRACE_FORMAT", "raw"},
		{"MSGTRACE_OUT", "/tmp/trace-%q.json"},
		{"MSGTRACE_OUT", "/tmp/trace-%"},
		{"MSGTRACE_FULL", "block"},
		{"MSGTRACE_MODE", "circular"},
		{"MSGTRACE_KEEP_STREAM", "yes"},
		{"MSGTRACE_CPU", "off"},
		{"MSGTRACE_FLOWS", "yes"},
		{"MSGTRACE_METHODS", "[abc"},
		{"MSGTRACE_METHODS", " , "},
		{"MSGTRACE_CAPTURE", "calls"},
		{"MSGTRACE_OUT", "/tmp/trace.bogus"},
		{"MSGTRACE_OUT", "/tmp/trace.txt"},
		{"MSGTRACE_MAX_CALLS", "0"},
		{"MSGTRACE_MAX_CALLS", "many"},
	} {
		_, err := FromEnv(env(map[string]string{c.name: c.value}), 1)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != c.name || ce.Value != c.value {
			t.Errorf("%s=%q: err %v", c.name, c.value, err)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, c.name) || !strings.Contains(msg, c.value) {
			t.Errorf("message %q", msg)
		}
	}
}

func TestCheckOut(t *testing.T) {
	dir := t.TempDir()
	if err := (Config{Out: filepath.Join(dir, "t.json")}).CheckOut(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("check left %v behind", left)
	}
	err := (Config{Out: filepath.Join(dir, "missing", "t.json")}).CheckOut()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Var != "MSGTRACE_OUT" {
		t.Fatalf("missing directory: %v", err)
	}
}
