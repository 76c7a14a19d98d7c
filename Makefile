.PHONY: build test bench run clean

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

build: ## build ./bin/digest
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/digest ./cmd/digest

test: ## the whole suite: installs/starts PostgreSQL and Mailpit when missing
	./scripts/test

bench: ## one seeded week end to end against a null SMTP server (README "Benchmarks")
	go run ./cmd/digest bench $(BENCH_FLAGS)

clean:
	rm -rf bin outbox digest.db digest.db-* digest.db.keys
