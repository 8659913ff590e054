# msgtrace build, fixtures, tests and demo. `make demo` and `make test` work on a fresh
# Debian 12 machine: both run `make setup` (idempotent) first.
SHELL := bash
GO ?= go
FIXTURES := testdata/fixtures
CORPUS := testdata/corpus
FUZZTIME ?= 60s

.PHONY: all setup build fixtures corpus test fuzz lint demo bench bench-dump bench-rebind bench-interposer bench-tracer clean

all: build

setup:
	bash scripts/setup.sh

build:
	$(GO) build -o bin/machobind ./cmd/machobind

fixtures: setup
	bash scripts/fixtures.sh $(FIXTURES)

corpus: setup
	bash scripts/corpus.sh $(CORPUS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

test: fixtures corpus lint
	$(GO) test -count=1 ./...

fuzz: fixtures
	$(GO) test ./machobind -run '^$$' -fuzz '^FuzzDump$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1

bench: bench-dump bench-rebind bench-interposer bench-tracer

# Raw trace (10,000,000 records) to Chrome JSON: records/s and peak RSS.
bench-tracer:
	$(GO) test ./tracer -run '^$$' -bench RawToJSON -benchtime 3x

# ns per call: interposer paused / recording vs direct call, dispatcher, malloc trampoline, rdtsc.
bench-interposer: setup
	bash scripts/bench-interposer.sh

# Time `machobind dump --json` against llvm-objdump on the largest corpus binary.
bench-dump: build corpus
	bash scripts/bench-dump.sh $(CORPUS)

# Rebinding cost per image (simulated dyld), 1/10/100 rebindings, small fixture to largest binary.
bench-rebind: fixtures corpus
	$(GO) test ./machobind -run '^$$' -bench 'Rebind|Match' -benchtime 200x

demo: setup build fixtures
	./bin/machobind dump $(FIXTURES)/objc-macos-arm64-exe-chained
	./bin/machobind dump --symbol objc_msgSend --json $(FIXTURES)/objc-macos-arm64-exe-chained

clean:
	rm -rf bin $(FIXTURES)
