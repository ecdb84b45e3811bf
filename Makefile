# raygo — the two commands a new user needs are `make demo` and `make test`;
# each installs what it needs first.
SHELL := /bin/bash
# A pipeline fails when any stage fails (make bench: a failing benchmark is not hidden by grep).
.SHELLFLAGS := -o pipefail -c
GO ?= go
TOOLS := $(CURDIR)/.cache/bin
# go test's own timeout: well inside CI's limit, so a hang fails instead of stalling.
TEST_TIMEOUT ?= 12m
FUZZ_TIME ?= 5s

.PHONY: all build deps venv proto test check demo bench bench-ray compat chaos clean

all: build

## deps: Go modules and redis-server (from Debian's packages when missing).
deps:
	$(GO) mod download
	scripts/ensure-tools.sh redis

## build: the CLI at bin/raygo.
build:
	$(GO) build -o bin/raygo ./cmd/raygo

## venv: .venv/ with the Python client (editable), pytest and grpcio-tools, all pinned.
venv:
	scripts/ensure-venv.sh

## proto: regenerate protos/raygopb and the Python stubs pyclient/raygo/_proto from
## protos/*.proto (installs protoc and plugins; grpcio-tools comes with the venv).
proto: venv
	scripts/ensure-tools.sh protoc
	scripts/gen-proto.sh
	scripts/gen-proto-python.sh

## test: every test, with real redis-server and real raygo processes on loopback, and
## the dashboard's in headless Chromium (Debian's chromium, installed when missing;
## screenshots into RAYGO_DASHBOARD_ARTIFACTS when set); one integration package again
## with mutual TLS on every endpoint; then the Python client's tests (pytest in .venv/,
## against bin/raygo clusters).
test: deps build venv
	scripts/ensure-tools.sh chromium
	RAYGO_REQUIRE_CHROMIUM=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	scripts/test-tls.sh
	scripts/test-python.sh

## check: formatting, vet, staticcheck, go.mod tidy, generated code in sync, race tests,
## and every fuzz target briefly (FUZZ_TIME each, default 5s).
check: deps build venv
	scripts/ensure-tools.sh protoc staticcheck chromium
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	scripts/check-tidy.sh
	scripts/check-proto.sh
	scripts/check-proto-python.sh
	RAYGO_REQUIRE_CHROMIUM=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	scripts/fuzz.sh $(FUZZ_TIME)

## demo: a local cluster (head + 3 raylets, in-memory store), its status, a clean stop.
demo: deps build venv
	scripts/demo.sh

## bench: benchmarks; each prints `BENCH <name> <value> <unit>` lines. One package at a
## time (-p 1), so one benchmark's load does not skew another's figures. The trace replay
## (tests/bench) takes 10-20 minutes on 2 cores and the GCS scale case up to 20 more:
## past go test's default 10 min timeout.
BENCH_TIMEOUT ?= 90m
bench: deps build
	RAYGO_BENCH=1 $(GO) test -count=1 -p 1 -timeout $(BENCH_TIMEOUT) -run 'Bench' -v ./placement/ ./admission/preemption/ ./autoscaler/ ./autoscaler/spotsim/ ./tests/... | grep -E '^BENCH|not measured'

## chaos: the chaos sequence of tests/chaos, long (CHAOS_STEPS, default 200; CHAOS_SEED,
## default 1), with the network faults (loss and delay through a user-space proxy, and
## partitions between network namespaces the run creates: scripts/in-netns.sh; without
## one the partitions are reported as not injected); `make test` runs a short one with
## kills and stops only.
CHAOS_STEPS ?= 200
CHAOS_SEED ?= 1
chaos: deps build
	RAYGO_CHAOS_STEPS=$(CHAOS_STEPS) RAYGO_CHAOS_SEED=$(CHAOS_SEED) RAYGO_CHAOS_NETWORK=1 scripts/in-netns.sh --or-here $(GO) test -count=1 -timeout 80m -run TestChaos -v ./tests/chaos/ | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|chaos (seed|recovery|faults|load|slow)|LOST|not true|step [0-9]+:|raylet pid|"level":"(warn|error)"'

## bench-ray: the autoscaler's plan cost against Ray's v1 and v2 planners (called in
## process, no cluster) and the HiGHS MIP optimum on seeded demand sets
## (scripts/bench-autoscaler-cost.sh); then the placement-group rates of one Ray-API
## script (tests/compat/bench/) on Ray (installed as make compat does) and on raygo, in a
## network namespace. BENCH lines with the ratios. Not part of bench.
bench-ray: build venv
	scripts/bench-autoscaler-cost.sh
	scripts/compat.sh --bench

## compat: the scripts in tests/compat under Ray (from PyPI, in .venv-ray/, on a local
## Ray cluster) and under raygo; one PASS/FAIL line per script. Not part of test.
compat: build venv
	scripts/compat.sh

clean:
	rm -rf bin .cache
