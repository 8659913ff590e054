package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestProgress: the progress line, when enabled, says how far the conversion is; it is
// disabled when stderr is not a terminal.
func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	if p := newProgress(&Session{"msgtrace", &buf, &buf}, "x", 10); p.enabled {
		t.Fatal("progress enabled on a buffer")
	}
	p := &progress{w: &buf, prog: "msgtrace", label: "big.mtrace", total: 4e6, enabled: true}
	p.add(1e6)
	p.finish()
	if s := buf.String(); !strings.Contains(s, "msgtrace: converting big.mtrace:  25% (1.0 of 4.0 MB read)") || !strings.HasSuffix(s, "\r\x1b[K") {
		t.Errorf("%q", s)
	}
}
