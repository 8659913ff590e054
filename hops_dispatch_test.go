package msgtrace

import "testing"

// TestDispatchHops runs the dispatch wrappers (hops_dispatch.c) against a stand-in for Apple's
// libdispatch and Blocks runtime (testdata/interposer/hops_dispatch.c): each of dispatch_async,
// dispatch_after, dispatch_barrier_async and dispatch_group_async, function and block forms,
// called as a rebound slot calls them, runs its work once on the queue's thread, each block
// copied and released once, and each is a hop: enqueued on the calling thread, begun and ended
// around the work on the queue's; paused, the calls pass through unchanged and mark nothing.
// The originals are found with dlsym, as on a device: the native build only.
func TestDispatchHops(t *testing.T) {
	tg := targets[0]
	runC(t, tg, tg.buildC(t, "hops_dispatch", readFile(t, "testdata/interposer/hops_dispatch.c"),
		"hops.c", "hops_dispatch.c", "trampoline_"+tg.arch+".S", "-rdynamic"))
}

// TestBenchHopsProgram keeps `make bench-hops`'s program (testdata/interposer/bench_hops.c)
// building and running: with few hops, every hop marked and every work item run (its figures
// are not checked: they are the benchmark's).
func TestBenchHopsProgram(t *testing.T) {
	tg := targets[0]
	runC(t, tg, tg.buildC(t, "bench_hops", readFile(t, "testdata/interposer/bench_hops.c"), "-DN=2000",
		"hops.c", "hops_dispatch.c", "trampoline_"+tg.arch+".S", "-rdynamic"))
}
