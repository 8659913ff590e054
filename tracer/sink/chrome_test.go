package sink

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestJSONStringEscapes(t *testing.T) {
	for _, s := range []string{`plain`, `q"uote`, `back\slash`, "ctl\x01\n", "bad\xffutf8", "ünïcødé", ""} {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q -> %s: %v", s, b, err)
		}
		if want := strings.ToValidUTF8(s, "\ufffd"); got != want {
			t.Errorf("%q -> %q, want %q", s, got, want)
		}
	}
}
