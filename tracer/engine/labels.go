// The names outputs give to what is not a method: threads, marks, and the pseudo-frames of
// calls that did not return normally.

package engine

import (
	"strconv"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// ThreadLabel is how a thread is named in every output: "main" for the main thread, else its
// own name (a GCD queue label or pthread name) if it has one, else "thread TID".
func ThreadLabel(t *stream.Thread) string {
	switch {
	case t.Main:
		return "main"
	case t.Name != "":
		return t.Name
	}
	return "thread " + strconv.FormatUint(t.TID, 10)
}

// MarkLabel names a mark as a frame: "[lost 12]", "[overflow 3]", "[overwritten 40]", "[wait]".
func MarkLabel(m *stream.Mark) string {
	if m.Kind == stream.MarkWait {
		return "[wait]"
	}
	return "[" + m.Kind.String() + " " + strconv.FormatUint(m.Count, 10) + "]"
}

// Pseudo-frames for calls that did not return normally: the time of a call still running at
// the end of the trace, and of a call an exception (or longjmp, or thread exit) went through.
const (
	FrameRunning = "[running]"
	FrameUnwound = "[unwound]"
)
