package msgtrace_test

import (
	"os"
	"testing"

	"github.com/msgtrace/msgtrace"
	"github.com/msgtrace/msgtrace/internal/agent"
)

// TestFlowsEnvAgrees: MSGTRACE_FLOWS as the C reads it before Go runs (rt_env.h, which decides
// whether the hops' hooks go in as modules register) and as internal/agent's FromEnv reads it:
// the C hooks exactly when Go accepts the configuration with flows on.
func TestFlowsEnvAgrees(t *testing.T) {
	t.Setenv("MSGTRACE_FLOWS", "")
	values := []string{"", "0", "1", " 0 ", "\t1\n", "\u00a01\u3000", "01", "10", "2", "on", "off", "yes", "no", "true", "false", "-0", "+1", "1\u200b", "0 0"}
	for _, v := range values {
		os.Setenv("MSGTRACE_FLOWS", v)
		g, err := agent.FromEnv(os.Getenv, 1)
		goOn := err == nil && g.Flows
		if c := msgtrace.HopsEnv(); c != goOn {
			t.Errorf("MSGTRACE_FLOWS=%q: C flows=%v, Go flows=%v (%v)", v, c, goOn, err)
		}
	}
	os.Unsetenv("MSGTRACE_FLOWS")
	if g, err := agent.FromEnv(os.Getenv, 1); err != nil || !g.Flows || !msgtrace.HopsEnv() {
		t.Errorf("MSGTRACE_FLOWS unset: Go flows=%v (%v), C flows=%v; want on", g.Flows, err, msgtrace.HopsEnv())
	}
}
