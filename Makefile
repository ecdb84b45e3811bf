# raygo — the two commands a new user needs are `make demo` and `make test`;
# each installs what it needs first.
SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/.cache/bin
# go test's own timeout: well inside CI's limit, so a hang fails instead of stalling.
TEST_TIMEOUT ?= 12m

.PHONY: all build deps proto test check demo bench clean

all: build

## deps: Go modules and redis-server (from Debian's packages when missing).
deps:
	$(GO) mod download
	scripts/ensure-tools.sh redis

## build: the CLI at bin/raygo.
build:
	$(GO) build -o bin/raygo ./cmd/raygo

## proto: regenerate protos/raygopb from protos/*.proto (installs protoc and plugins).
proto:
	scripts/ensure-tools.sh protoc
	scripts/gen-proto.sh

## test: every test, with real redis-server and real raygo processes on loopback.
test: deps build
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

## check: formatting, vet, staticcheck, go.mod tidy, generated code in sync, race tests.
check: deps build
	scripts/ensure-tools.sh protoc staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	scripts/check-tidy.sh
	scripts/check-proto.sh
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

## demo: a local cluster (head + 3 raylets, in-memory store), its status, a clean stop.
demo: deps build
	scripts/demo.sh

## bench: benchmarks; each prints `BENCH <name> <value> <unit>` lines.
bench: deps build
	RAYGO_BENCH=1 $(GO) test -count=1 -run 'Bench' -v ./placement/ ./tests/... | grep '^BENCH' 

clean:
	rm -rf bin .cache
