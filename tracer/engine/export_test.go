package engine

// The engine's knobs, for its tests (package engine_test): smaller segments, pass 1's and the
// aggregates' goroutines whatever the size, and what the aggregates' path did.
var (
	SegEvents        = &segEvents
	ParallelPass1Min = &parallelPass1Min
	AggParallelMin   = &aggParallelMin
	AggTestHook      = &aggTestHook
)

const (
	PipeMin  = pipeMin
	AggChunk = aggChunk
)
