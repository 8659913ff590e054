package msgtrace_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace"
	"github.com/msgtrace/msgtrace/internal/agent"
)

// TestEarlyConfigAgrees: the C that reads the variables before Go runs (the early recording of
// MSGTRACE_METHODS=all, and the preload loader's MSGTRACE_METHODS test, rt_env.h) reads each
// value as internal/agent's FromEnv does: it records early exactly when Go will trace methods
// with recording on, with the same pool size and modes, and it calls MSGTRACE_METHODS all
// exactly when Go does. A value the two read differently would start recording that Go then
// refuses, or leave a launch untraced that Go traces.
func TestEarlyConfigAgrees(t *testing.T) {
	// white space Go's strings.TrimSpace removes, ASCII and not; U+200B is not white space
	spaces := []string{" ", "\t", "\n", "\v\f\r", "\u0085", "\u00a0", "\u1680", "\u2000", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"}
	words := map[string][]string{
		"MSGTRACE_START":   {"on", "paused", "ON", "Paused", "off", "o n", "on\u200b", "onn", "pause"},
		"MSGTRACE_CAPTURE": {"methods", "both", "sends", "BOTH", "Methods", "all", "method", "sends,methods"},
		"MSGTRACE_MODE":    {"stream", "ring", "RING", "Stream", "flight", "rings"},
		"MSGTRACE_FULL":    {"wait", "drop", "DROP", "Wait", "never", "dro p"},
		"MSGTRACE_BUFFER_MB": {"1", "+1", "-1", "0", "32", "64", "4096", "4097", "+4096", "0004096", "000000000000000000000000000000000000000007",
			"99999999999999999999999", "0x10", "1e3", "5MB", "++5", "+-5", "+", "-", "٣", "1 2", "1_000"},
		"MSGTRACE_METHODS": {"all", "ALL", "All", "app", "al", "alll", "all,app", "a ll", "*"},
		"MSGTRACE_CPU":     {"0", "1", "2", "00", "01", "on", "off", "1 0", "-0", "+1", "١"},
	}
	type setting struct{ name, value string }
	var cases [][]setting
	for _, v := range earlyVars {
		cases = append(cases, []setting{{v, ""}})
		for _, s := range spaces {
			cases = append(cases, []setting{{v, s}})
		}
		for _, w := range words[v] {
			cases = append(cases, []setting{{v, w}}, []setting{{v, " " + w + "\t"}})
			for _, s := range spaces {
				cases = append(cases, []setting{{v, s + w + s}}, []setting{{v, w + s}})
			}
		}
	}
	// together: every early setting at once
	cases = append(cases,
		[]setting{{"MSGTRACE_METHODS", "all"}, {"MSGTRACE_MODE", "ring"}, {"MSGTRACE_FULL", "drop"}, {"MSGTRACE_BUFFER_MB", "7"}},
		[]setting{{"MSGTRACE_METHODS", " all "}, {"MSGTRACE_START", "paused"}, {"MSGTRACE_MODE", "ring"}},
		[]setting{{"MSGTRACE_METHODS", "all"}, {"MSGTRACE_CAPTURE", "sends"}, {"MSGTRACE_BUFFER_MB", "7"}},
		[]setting{{"MSGTRACE_METHODS", "all"}, {"MSGTRACE_MODE", "ring"}, {"MSGTRACE_FULL", "never"}},
		[]setting{{"MSGTRACE_METHODS", "all"}, {"MSGTRACE_CPU", "0"}, {"MSGTRACE_MODE", "ring"}},
		[]setting{{"MSGTRACE_METHODS", "all"}, {"MSGTRACE_CPU", "off"}},
	)
	for _, v := range earlyVars {
		t.Setenv(v, "") // restored after the test
	}
	for _, c := range cases {
		var desc []string
		for _, s := range c {
			desc = append(desc, s.name, s.value)
		}
		checkEarlyConfig(t, desc...)
	}
	t.Logf("%d settings read alike", len(cases))
}

// earlyVars are the variables the early C reads.
var earlyVars = []string{"MSGTRACE_START", "MSGTRACE_CAPTURE", "MSGTRACE_MODE", "MSGTRACE_FULL", "MSGTRACE_BUFFER_MB", "MSGTRACE_METHODS", "MSGTRACE_CPU"}

// checkEarlyConfig sets the early variables to the name, value pairs given (the others unset)
// and checks that the C (msgtrace.EarlyConfig) reads them as internal/agent's FromEnv does.
func checkEarlyConfig(t *testing.T, pairs ...string) {
	t.Helper()
	for _, v := range earlyVars {
		os.Unsetenv(v)
	}
	var desc []string
	for i := 0; i < len(pairs); i += 2 {
		os.Setenv(pairs[i], pairs[i+1])
		desc = append(desc, pairs[i]+"="+strings.ReplaceAll(pairs[i+1], "\n", `\n`))
	}
	record, all, ring, drop, mb := msgtrace.EarlyConfig()
	g, err := agent.FromEnv(os.Getenv, 1)
	goAll := err == nil && slices.Equal(g.Methods, []string{"all"})
	if methodsOnly := len(pairs) == 2 && pairs[0] == "MSGTRACE_METHODS"; methodsOnly && all != goAll {
		t.Errorf("%q: C reads MSGTRACE_METHODS all=%v, Go %v (%v)", desc, all, goAll, err)
	}
	if err == nil && all != goAll {
		t.Errorf("%q: C reads MSGTRACE_METHODS all=%v, Go %v", desc, all, goAll)
	}
	if !all && strings.TrimSpace(os.Getenv("MSGTRACE_METHODS")) != "" {
		return // C records early under MSGTRACE_METHODS=all only (the loader asks mt_env_methods_all first)
	}
	goRecord := err == nil && !g.Paused && g.Capture != "sends"
	if record != goRecord {
		t.Errorf("%q: C records early=%v, Go records methods from the start=%v (%v)", desc, record, goRecord, err)
		return
	}
	if !record {
		return
	}
	wantMB := g.BufferMB
	if wantMB == 0 {
		wantMB = agent.DefaultBufferMB
	}
	if ring != g.Ring || drop != g.Drop || mb != wantMB {
		t.Errorf("%q: C ring=%v drop=%v buffer=%d MiB, Go ring=%v drop=%v buffer=%d MiB", desc, ring, drop, mb, g.Ring, g.Drop, wantMB)
	}
}

// FuzzEarlyConfig: the C that reads the environment before Go runs (rt_env.h) and Go's
// parser (internal/agent's FromEnv) agree on any values of the variables the C reads, set
// together (TestEarlyConfigAgrees is its fixed cases; `make fuzz` runs it). Values with a NUL
// byte cannot be in an environment.
func FuzzEarlyConfig(f *testing.F) {
	f.Add("on", "methods", "stream", "wait", "64", "all", "")
	f.Add("", "both", "ring", "drop", "+7", " all ", "0")
	f.Add("paused", "", "", "never", "4097", "ALL", "1")
	f.Add("ON", "sends", "RING", " DROP\u00a0", "0004096", "all\u200b", " 0\u3000")
	f.Add("\u2000on\u3000", "Methods", "rings", "", "99999999999999999999999", "al", "on")
	f.Fuzz(func(t *testing.T, start, capture, mode, full, bufferMB, methods, cpu string) {
		vals := []string{start, capture, mode, full, bufferMB, methods, cpu}
		var pairs []string
		for i, v := range vals {
			if strings.IndexByte(v, 0) >= 0 {
				t.Skip("a NUL byte cannot be in an environment")
			}
			if v != "" {
				pairs = append(pairs, earlyVars[i], v)
			}
		}
		checkEarlyConfig(t, pairs...)
	})
}

// checkWaitsEnv sets MSGTRACE_WAITS to v and checks that the C (rt_env.h's mt_env_waits, which
// waits.c reads at load) and internal/agent's FromEnv read it alike: on, off, or refused.
func checkWaitsEnv(t *testing.T, v string) {
	t.Helper()
	os.Setenv("MSGTRACE_WAITS", v)
	c := msgtrace.EnvWaits()
	// Go reads MSGTRACE_WAITS alone (the other variables as unset, whatever the tests before set)
	g, err := agent.FromEnv(func(k string) string {
		if k == "MSGTRACE_WAITS" {
			return v
		}
		return ""
	}, 1)
	want := 1
	switch {
	case err != nil && strings.Contains(err.Error(), "MSGTRACE_WAITS"):
		want = -1
	case err != nil:
		t.Fatalf("MSGTRACE_WAITS=%q: %v", v, err)
	case g.NoWaits:
		want = 0
	}
	if c != want {
		t.Errorf("MSGTRACE_WAITS=%q: C reads %d, Go %d (1 on, 0 off, -1 refused)", v, c, want)
	}
}

// TestWaitsEnvAgrees: MSGTRACE_WAITS is read alike by the C and Go on fixed values (FuzzWaitsEnv
// on any).
func TestWaitsEnvAgrees(t *testing.T) {
	t.Setenv("MSGTRACE_WAITS", "")
	for _, v := range []string{"", "0", "1", "on", "off", "ON", " Off\t", "\u00a00\u3000", "2", "yes", "o n", "0\u200b", "offf", "01"} {
		checkWaitsEnv(t, v)
	}
}

// FuzzWaitsEnv: the C and Go read any MSGTRACE_WAITS alike (`make fuzz` runs it).
func FuzzWaitsEnv(f *testing.F) {
	for _, v := range []string{"0", "1", " on ", "OFF", "\u20000", "x"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if strings.IndexByte(v, 0) >= 0 {
			t.Skip("a NUL byte cannot be in an environment")
		}
		t.Setenv("MSGTRACE_WAITS", "")
		checkWaitsEnv(t, v)
	})
}
