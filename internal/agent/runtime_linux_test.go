package agent

import (
	"testing"

	"github.com/msgtrace/msgtrace"
)

// TestWholeProcessMappings: over this process's runtime, wholeProcess passes the mappings on,
// so that the static archive's rebinding reads them once too.
func TestWholeProcessMappings(t *testing.T) {
	ms, err := wholeProcess{msgtrace.ELFRuntime()}.Mappings()
	if err != nil || len(ms) == 0 {
		t.Errorf("wholeProcess over the ELF runtime: %d mappings, %v", len(ms), err)
	}
}
