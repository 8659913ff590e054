// Package engine reads traces (streams or raw dumps, tracer/stream) and tells sinks their
// calls, each thread in pre-order, in memory bounded by stack depth.
//
//	streams ──► pass 1 (stream_read.go, pass1.go) ──► pass 2: segments replayed ──► the pipe ──► sinks
//	            check frames, index threads,          in pre-order                (pipe.go)     Needs().Tree,
//	            pending stacks, durations             (stream_replay.go,          end, filter,  budgets
//	                    │  (stream_tree.go)            order.go)                  nesting       (budget.go)
//	                    └─ aggregates, no filter: each thread read backwards ──► Needs().Stacks (aggregate*.go, trie.go)
//
// A thread's records arrive in the order its calls ended (children before their parent):
// what a recorder can write without holding anything. Pass 1 checks every frame and keeps
// what lets pass 2 replay each segment of a thread on its own (the calls spanning segments);
// pass 2 walks the segments in pre-order; a second goroutine (the pipe) converts each call's
// End, names and filters it and drives the sinks. Raw dumps (process.go) are converted into
// the same model: each thread's records, in the order calls ended, put in pre-order by PreOrder
// and told to the pipe as pass 2 tells a stream's, so there is one filter and one self time.
//
// The sink contract. A Sink takes calls in the order they ended (Call, Skip, Mark between
// BeginThread and EndThread; Close with the Totals) and declares in Needs what else it takes
// and asks of the engine; the engine reads Needs, never a sink's type:
//
//   - Tree: the TreeSink that takes each thread's calls in pre-order, driven directly by
//     pass 2 (the formats' sinks, the report); nil: the Sink's own methods.
//   - Fold and Budget: a timeline, which keeps at most Budget calls (the longest: pass 1
//     counts durations, budget.go folds the shorter ones into their callers) and is told in
//     Fold what was folded.
//   - Stacks: an aggregate (pprof, folded, flame graphs), which needs each call's stack,
//     count and self time, not time order: with no filter on calls the engine fills this
//     StackTrie directly, reading each thread backwards, with the same result.
//   - Abort: what ends a sink holding a writer goroutine when a conversion fails before Close.
//
// Tee drives several sinks from one reading of the trace (tee.go): each as its own Needs say,
// the aggregates sharing one trie, filled by the aggregates' path beside pass 2 when no
// filter drops calls.
package engine
