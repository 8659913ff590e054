package tracetest

import (
	"bytes"

	"github.com/msgtrace/msgtrace/tracer/engine"
)

// Inputs makes streams in memory inputs of ProcessStreams.
func Inputs(bs ...[]byte) []engine.Input {
	var in []engine.Input
	for _, b := range bs {
		in = append(in, engine.Input{R: bytes.NewReader(b), Size: int64(len(b))})
	}
	return in
}

// GenericSink hides an aggregate's trie (Needs.Stacks) from the engine: the sink then takes
// the generic path (the op pipe and the trie's Enter and Exit).
type GenericSink struct{ engine.Sink }

// Needs: the sink's, without its trie.
func (g GenericSink) Needs() engine.Needs {
	n := g.Sink.Needs()
	n.Stacks = nil
	return n
}
