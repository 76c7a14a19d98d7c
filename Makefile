.PHONY: build test bench run clean

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BENCH_TEST_DB := postgres://postgres@127.0.0.1:5432/test?sslmode=disable

build: ## build ./bin/digest
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/digest ./cmd/digest

test: ## the whole suite: installs/starts PostgreSQL and Mailpit when missing
	./scripts/test

bench: ## one seeded week end to end against a null SMTP server (README "Benchmarks"); DIGEST_DATABASE_URL or the local test database
	@if [ -z "$$DIGEST_DATABASE_URL" ]; then echo "make bench: DIGEST_DATABASE_URL is unset: using the local test database $(BENCH_TEST_DB)" >&2; fi
	go run ./cmd/digest-bench --database-url "$${DIGEST_DATABASE_URL:-$(BENCH_TEST_DB)}" $(BENCH_FLAGS)

clean:
	rm -rf bin outbox digest.db digest.db-* digest.db.keys
