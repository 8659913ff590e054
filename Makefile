# msgtrace build, fixtures, tests and demo. `make demo` and `make test` work on a fresh
# Debian 12 machine: both run `make setup` (idempotent) first.
SHELL := bash
GO ?= go
FIXTURES := testdata/fixtures
CORPUS := testdata/corpus

.PHONY: all setup build fixtures corpus check test test-race fuzz lint demo bench bench-dump bench-rebind bench-interposer bench-waits bench-tracer bench-startup bench-fixedcost bench-firsttouch bench-cpu bench-hops bench-viewers bench-convert cross clean

all: build

setup:
	bash scripts/setup.sh

UNAME := $(shell uname -s)
ifeq ($(UNAME),Darwin)
LIBMSGTRACE := bin/libmsgtrace.dylib
else
LIBMSGTRACE := bin/libmsgtrace.so
endif

# msgtrace and machobind, and next to them the library `msgtrace run` preloads (on Linux also the small
# preload loader, libmsgtrace-preload.so, that starts it only where there is something to trace).
# LIBLDFLAGS: the library's Go runtime never sends the traced program SIGURG (its asynchronous
# preemption signal): a program that installs its own SIGURG handler after the library started
# (gnustep-base's gdnc installs one for every signal, which aborts when re-entered) would get
# it while msgtrace's Go code runs, e.g. converting at exit. The same flag is in
# scripts/cross.sh and internal/testfiles (LibLDFlags) for the tests' builds.
LIBLDFLAGS := -X=runtime.godebugDefault=asyncpreemptoff=1

build:
	$(GO) build -o bin/machobind ./cmd/machobind
	$(GO) build -o bin/msgtrace ./cmd/msgtrace
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -ldflags='$(LIBLDFLAGS)' -o $(LIBMSGTRACE) ./cmd/libmsgtrace
ifneq ($(UNAME),Darwin)
	$${CC:-cc} -O2 -Wall -shared -fPIC -o bin/libmsgtrace-preload.so cmd/libmsgtrace/loader/loader.c -ldl
endif

fixtures: setup
	bash scripts/fixtures.sh $(FIXTURES)

corpus: setup
	bash scripts/corpus.sh $(CORPUS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The tests come in two tiers (internal/testfiles/tiers.go).
#
# `make check`, the fast tier: `go test -short` on every package; no root, no network (the Go
# module cache filled once), no setup. The slow cases (qemu, browsers, GNUstep programs, GCC's
# suite) are left to `make test`, each saying why; a test whose tool or fixtures are absent is
# skipped, saying which (never with CI=true).
CHECK_TIMEOUT ?= 15m
check: lint
	$(GO) test -short -count=1 -timeout $(CHECK_TIMEOUT) ./...

# `make test`, the whole suite (what CI runs): setup, fixtures and corpus first, then every test,
# a missing tool failing its test. -timeout is per test binary, sized at about twice what each
# took on a 2-core machine at load 10 (README: "Tests in tiers"): the root package's interposer
# tests and cmd/libmsgtrace's real processes (18 and 17 min there, ~4 min idle) at 40m; GCC's
# Objective-C suite (internal/gccsuite: ~1 min, +15 s the first time, unpacking gcc-12-source's
# tests into bin/gccsuite) at 15m; every other package (72 s at most; the tracer's, ./tracer/...,
# about 1 min together) at 10m. Then the race
# detector on the packages that run goroutines together (test-race).
MODULE := github.com/msgtrace/msgtrace
HEAVY_TIMEOUT ?= 40m
GCCSUITE_TIMEOUT ?= 15m
TEST_TIMEOUT ?= 10m
test: fixtures corpus lint
	$(GO) test -count=1 -timeout $(HEAVY_TIMEOUT) . ./cmd/libmsgtrace
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -vxF -e $(MODULE) -e $(MODULE)/cmd/libmsgtrace -e $(MODULE)/internal/gccsuite)
	$(GO) test -count=1 -timeout $(GCCSUITE_TIMEOUT) ./internal/gccsuite
	$(MAKE) test-race

# -race (in make test): the tracer (the pipe, the order engine, pass 1 and the aggregates on
# several goroutines), the CLI's progress, the rebinder's locks, and the root package's tests that
# run the recorder in the test process (cgo threads and goroutines marking at once); -short, the
# fast tier's sizes. Not cmd/libmsgtrace: its tests drive the library in other processes.
RACE_TIMEOUT ?= 20m
RACE_PKGS := ./tracer/... ./internal/agent ./internal/cli ./cmd/machobind ./cmd/msgtrace
test-race:
	$(GO) test -race -short -count=1 -timeout $(RACE_TIMEOUT) $(RACE_PKGS)
	$(GO) test -race -short -count=1 -timeout $(RACE_TIMEOUT) -run 'Rebind|Protection|Mappings' ./machobind
	$(GO) test -race -short -count=1 -timeout $(RACE_TIMEOUT) -run '^(TestStreamRealRun|TestRebindProcessELF|TestEarlyConfigAgrees|TestEncoderMatchesGoWriter)$$' .

# Every fuzz target, FUZZTIME each (make fuzz FUZZTIME=10m for a long run); their seed corpora
# are committed under each package's testdata/fuzz/ and run as tests by check and test.
FUZZTIME ?= 15s
FUZZ_TARGETS := \
	./machobind:FuzzDump ./machobind:FuzzELFImage \
	./tracer:FuzzStream ./tracer:FuzzProcess ./tracer:FuzzFlame ./tracer:FuzzFlameNames ./tracer/engine:FuzzAggregate \
	./internal/simdyld:FuzzLoad \
	.:FuzzEncoder .:FuzzEarlyConfig .:FuzzExpandPath .:FuzzWaitsEnv \
	./internal/cli:FuzzCommandLine ./swiftname:FuzzDemangle
fuzz: fixtures
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "fuzz: $${t#*:} ($${t%%:*}, $(FUZZTIME))"; \
	  $(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1; \
	done

bench: bench-dump bench-rebind bench-interposer bench-tracer bench-startup bench-fixedcost bench-firsttouch bench-cpu

# Raw trace (10,000,000 records) to Chrome JSON: records/s and peak RSS; 4,000,000 calls read
# from a stream against the same calls from a raw dump (calls/s, bytes/call).
bench-tracer:
	$(GO) test ./tracer -run '^$$' -bench 'RawToJSON|StreamDecode' -benchtime 3x

# A 1,000,000-call trace in every output format: size, and the time speedscope takes to open it.
bench-viewers: setup
	bash scripts/bench-viewers.sh 1000000

# A real program recorded big and converted: testdata/gnustep/oneloop.m (gnustep-base; its whole
# run one long outermost call, as a run loop is) under MSGTRACE_METHODS=all, ~12 M calls, then
# `machobind trace` to each format (wall, calls/s, peak RSS, bytes/call), and the library's
# conversion at exit against writing the stream alone (scripts/bench-convert.sh; REPS=3 for
# medians).
bench-convert: build
	bash scripts/bench-convert.sh

# ns per call: interposer paused / recording vs direct call, dispatcher, malloc trampoline, rdtsc.
bench-interposer: setup
	bash scripts/bench-interposer.sh

# The cost of an async hop (hops.c, hops_dispatch.c): ns per hop through the dispatch wrapper
# against the plain call (one process, CPU clock); then a gnustep-base program's timers added
# and fired, untraced, traced with MSGTRACE_FLOWS=0 and with flows on, alternated (RUNS=5,
# N=20000 timers each); medians, what a hop adds and the ratios against untraced.
bench-hops: build
	bash scripts/bench-hops.sh $${RUNS:-5} $${N:-20000}

# What recording contended waits costs: an uncontended pthread mutex untraced vs through the
# replacements (waits on, off), and one recorded wait.
bench-waits: setup
	bash scripts/bench-waits.sh

# What preloading the library costs a process: /bin/true alone vs preloaded.
bench-startup: build
	bash scripts/bench-startup.sh

# The fixed cost of a traced process: a small gnustep-base program (testdata/gnustep/startup.m)
# from exec to exit, untraced and traced (default selection, MSGTRACE_METHODS=all), alternated,
# medians (RUNS=30), each run split at main's entry and return: the fixed cost is what tracing
# adds before main and after it (BASE=dir: a second build in the same rounds).
bench-fixedcost: build
	bash scripts/bench-fixedcost.sh $${RUNS:-30} bin $${BASE:-}

# What sampling each thread's CPU time costs (MSGTRACE_CPU): 64 threads that run and sleep by
# turns (testdata/gnustep/cputhreads.m), traced with sampling off and on, alternated: wall and CPU
# time ratios, and the drain's CPU time per thread read.
bench-cpu: build
	bash scripts/bench-cpu.sh $${RUNS:-10} $${THREADS:-64}

# Crashes, not time: gnustep-base programs whose threads first touch Foundation before their
# main thread does (testdata/gnustep/firsttouch.m and poolnew.m, two races of gnustep-base's
# own), RUNS=300 runs each untraced, traced at the default selection and with
# MSGTRACE_METHODS=all, alternated; how many died of a signal in each, and Fisher's exact test
# of each traced count against the untraced one, by block of rounds too; exit status 3 when a
# traced configuration crashed more often beyond chance (BASE=dir: a second build in the same
# rounds; FIRSTTOUCH_PROGS, FIRSTTOUCH_CPUS, FIRSTTOUCH_BLOCKS, FIRSTTOUCH_COUNTS: see the script).
bench-firsttouch: build
	bash scripts/bench-firsttouch.sh $${RUNS:-300} bin $${BASE:-}

# Time `machobind dump --json` against llvm-objdump on the largest corpus binary.
bench-dump: build corpus
	bash scripts/bench-dump.sh $(CORPUS)

# Rebinding cost per image (simulated dyld), 1/10/100 rebindings, small fixture to largest binary.
bench-rebind: fixtures corpus
	$(GO) test ./machobind -run '^$$' -bench 'Rebind|Match' -benchtime 200x

# Trace the demo app under `msgtrace run`: trace.pftrace and trace.json (ui.perfetto.dev),
# trace.speedscope.json (speedscope), trace.pb.gz (go tool pprof), trace.folded and trace.svg
# (a flame graph) in the current directory, and the report's summary (top methods, hitches).
# Linux: testdata/gnustep/demo.m, a Foundation app built by gcc against gnustep-base, every
# method traced (scripts/demo.sh); its streams stay in bin/demo/streams for `msgtrace report`.
ifeq ($(UNAME),Darwin)
demo: build
	mkdir -p bin/demo
	clang -fobjc-arc -O1 -g -o bin/demo/demoapp testdata/src/demo.m -framework Foundation
	./bin/msgtrace run --out trace.json --perfetto trace.pftrace --speedscope trace.speedscope.json --pprof trace.pb.gz --folded trace.folded --flame trace.svg -- bin/demo/demoapp
else
demo: setup build
	bash scripts/demo.sh bin/demo
endif
	@echo "demo: open trace.pftrace (or trace.json) in https://ui.perfetto.dev, trace.speedscope.json in https://www.speedscope.app, trace.svg in a browser, or run: go tool pprof -top trace.pb.gz"

# Apple artifacts, cross-built from Linux (scripts/cross.sh): macOS dylibs (arm64, x86_64,
# universal), iOS device and simulator archives, libmsgtrace.xcframework (static),
# msgtrace.framework for iOS, the simulator and macOS, msgtrace.xcframework (dynamic) and
# msgtrace.h in bin/cross; then every one is read back with `machobind dump` and llvm-objdump and
# checked, and an app is linked against each framework (scripts/cross-check.sh).
cross: setup
	bash scripts/cross.sh ./cmd/libmsgtrace bin/cross
	bash scripts/cross-check.sh bin/cross

clean:
	rm -rf bin $(FIXTURES) trace.json trace.pftrace trace.speedscope.json trace.pb.gz trace.folded trace.svg
