// Package sink is the tracer's outputs, each an engine.Sink declaring its needs: the
// timelines (chrome.go: Chrome trace event JSON, with chrome_names.go and chrome_groups.go;
// perfetto.go: Perfetto protobuf, with perfetto_proto.go, its encoding, perfetto_compress.go,
// its compressed batches, and perfetto_deflate.go, zlib made for its packets; speedscope.go:
// speedscope's own format), kept within a budget, and the aggregates, filled from the
// engine's StackTrie (pprof.go; stacks.go: folded stacks; flame.go: SVG flame graphs). meta.go
// is what they are told about the program, outbuf.go and decimal.go the text timelines'
// output, instants.go the instants they show.
//
// The list of formats, their names and extensions is tracer.Registry's.
package sink
