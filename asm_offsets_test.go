package msgtrace

import (
	"bytes"
	"os"
	"testing"

	"github.com/msgtrace/msgtrace/internal/asmoffsets"
)

// TestAsmOffsetsCurrent regenerates asm_offsets.h in memory from rt.h and trampoline.h, with
// every compiler of msgtrace's targets found here, and fails when the committed file differs.
func TestAsmOffsetsCurrent(t *testing.T) {
	want, measured, err := asmoffsets.Generate(".", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("asm_offsets.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("asm_offsets.h is stale: run go generate in the repository root; want:\n%s", want)
	}
	t.Logf("the same on %v", measured)
}
