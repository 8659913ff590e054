package agent

import (
	"fmt"
	"os"

	"github.com/msgtrace/msgtrace"
	"github.com/msgtrace/msgtrace/machobind"
)

// markMain rebinds, in the main program only, the slot through which its start code enters
// main (msgtrace.MainRebinding), so that "main" is marked on the timeline. Installed after
// main started (msgtrace_start from a host), it changes nothing: the slot was used already.
// A failure costs the mark only.
func (a *Agent) markMain(rt machobind.Runtime) {
	r, ok := msgtrace.MainRebinding()
	if !ok {
		return
	}
	imgs, err := rt.Images()
	if err == nil && len(imgs) > 0 {
		_, err = machobind.NewRebinder(rt).RebindImage(imgs[0], r)
	}
	if err != nil && os.Getenv("MSGTRACE_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "msgtrace: the main mark: %v\n", err)
	}
}
