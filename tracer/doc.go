// Package tracer turns what the recorder wrote into something a person reads or a CI job
// judges: Perfetto protobuf, Chrome trace event JSON, speedscope, pprof, folded stacks, SVG
// flame graphs, reports (hitches, hot methods) and diffs between runs.
//
// Input is a stream (stream.go: the append-only frames the library's drain writes while the
// program runs; several streams, one per process, merge onto one timeline) or a raw dump of
// the earlier format (raw.go: one buffer per thread, how traces came off an iPhone). A thread's
// records arrive in the order its calls ended (children before their parent): what a recorder
// can write without holding anything. Streams are read in two passes in memory bounded by
// stack depth (stream_read.go, stream_tree.go), and sinks are told each thread's calls in
// pre-order (TreeSink); timelines keep a budget of the longest calls (budget.go). The
// aggregates (pprof, folded, SVG: one node per distinct stack) need no time order: with no
// filter on calls, each thread is read backwards into a trie instead (aggregate.go), with the
// same output.
package tracer
