// Package tracer turns what the recorder wrote into something a person reads or a CI job
// judges: Perfetto protobuf, Chrome trace event JSON, speedscope, pprof, folded stacks, SVG
// flame graphs, reports (hitches, hot methods) and diffs between runs.
//
// This package is the entry: the one list of output formats (Registry: name, extensions,
// kind, run's flag, help line, default budget, constructor) that the command line, run's
// flags, MSGTRACE_FORMAT and the help text read, and the output names (FormatFor, WithPID).
// The work is done along the pipeline by the packages under it:
//
//	tracer/stream   the formats on disk: the stream's frames and their decoding, the reference
//	                StreamWriter, the raw dump (Record, Header, Thread, Names, Reader, Writer),
//	                marks and instants
//	tracer/engine   reading them in order: Options, Call, Totals, the sink contract (Sink,
//	                TreeSink, Needs), pass 1, pre-order replay, the pipe, budgets, the
//	                aggregates' path (its doc draws the pipeline)
//	tracer/sink     the outputs, one file each: chrome.go, perfetto.go, speedscope.go,
//	                pprof.go, stacks.go (folded), flame.go
//	tracer/report   what a trace says rather than draws: the report, launches, diffs of runs
//
// The integration tests (every format on the same streams, the two paths of the aggregates
// against each other, the fuzz targets) are this package's.
package tracer
