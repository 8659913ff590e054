package testfiles

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The tests come in two tiers. The whole suite (`make test`, what CI runs) runs everything and
// installs everything it needs first (scripts/setup.sh): a missing tool fails the test there.
// The fast tier (`go test -short`, `make check`: no root, no network, a few minutes) leaves out
// the slow cases (qemu, browsers, GNUstep applications, GCC's suite, cross builds), each saying
// why (Slow), and skips what needs a tool that is absent, saying which (Missing) — except in
// CI (CI=true), where nothing is skipped for a missing tool.

// Slow skips t in the fast tier (-short), saying why it is left to the whole suite.
func Slow(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip("whole suite only (make test), not with -short: " + why)
	}
}

// Missing reports that something t needs is not installed: it skips t in the fast tier
// (-short) outside CI, and fails it in the whole suite and whenever CI=true.
func Missing(t testing.TB, what string) {
	t.Helper()
	msg := what + " missing: run `make setup` (scripts/setup.sh)"
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

// NeedTools looks every tool up (in PATH, or as a path) and calls Missing for those absent.
func NeedTools(t testing.TB, tools ...string) {
	t.Helper()
	var absent []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			absent = append(absent, tool)
		}
	}
	if len(absent) > 0 {
		Missing(t, strings.Join(absent, ", "))
	}
}
