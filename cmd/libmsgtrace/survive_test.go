package main

import (
	"bytes"
	"strings"
	"testing"
)

type node struct{ next *node }

// fault reads through a nil pointer: a SIGSEGV in Go code, which the Go runtime turns into a
// panic.
//
//go:noinline
func fault(n *node) *node { return n.next }

func faultSurvived(after func()) (reached bool) {
	defer survive("testing", after)
	fault(nil)
	return true
}

// TestSurvive: a fault in the library's Go code on the program's thread is one line naming the
// function, and the program goes on.
func TestSurvive(t *testing.T) {
	var buf bytes.Buffer
	saved := stderr
	stderr = &buf
	defer func() { stderr = saved }()
	ran := false
	if faultSurvived(func() { ran = true }) || !ran {
		t.Fatalf("after the panic: returned normally %v, after ran %v", !ran, ran)
	}
	line := buf.String()
	if strings.Count(line, "\n") != 1 || !strings.HasPrefix(line, "msgtrace: testing failed in the tracer's own code: panic: runtime error: invalid memory address or nil pointer dereference (in github.com/msgtrace/msgtrace/cmd/libmsgtrace.fault at survive_test.go:") {
		t.Errorf("line: %q", line)
	}
}
