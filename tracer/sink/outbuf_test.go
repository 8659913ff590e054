package sink

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
)

// failAfter is a writer that fails once n bytes have been written.
type failAfter struct {
	n   int
	got bytes.Buffer
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.got.Len()+len(p) > f.n {
		return 0, errors.New("disk full")
	}
	return f.got.Write(p)
}

// TestOutWriter: the timelines' output keeps its bytes in order through the writer goroutine
// (many blocks, in place and through Write), writes a small output at Flush alone, and
// reports a write error at Flush at the latest.
func TestOutWriter(t *testing.T) {
	for _, n := range []int{10, 300_000} {
		var got, want bytes.Buffer
		o := newOutWriter(&got)
		for i := 0; i < n; i++ {
			s := strconv.Itoa(i) + ","
			want.WriteString(s)
			if i%2 == 0 {
				o.WriteString(s)
			} else {
				o.commit(append(o.tail(), s...))
			}
			if n == 10 && got.Len() > 0 {
				t.Fatal("a small output written before Flush")
			}
		}
		if err := o.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%d writes: %d bytes out of %d, or in another order", n, got.Len(), want.Len())
		}
		if n > 10 && want.Len() < 3*outBlock {
			t.Fatalf("only %d bytes: fewer blocks than the writer holds", want.Len())
		}
	}
	f := &failAfter{n: 100}
	o := newOutWriter(f)
	for i := 0; i < 10*outBlock/8; i++ {
		o.WriteString("01234567")
	}
	if err := o.Flush(); err == nil || f.got.Len() != 0 {
		t.Fatalf("Flush: %v, %d bytes written", err, f.got.Len())
	}
}
