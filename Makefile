.PHONY: build release test check bench run clean

# What "digest version" prints (cmd/digest/version.go): the version, the
# commit and its time (the build time of a reproducible build). The
# Dockerfile takes the same three as build arguments.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_TIME ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildTime=$(BUILD_TIME)
BENCH_TEST_DB := postgres://postgres@127.0.0.1:5432/test?sslmode=disable

build: ## build ./bin/digest
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/digest ./cmd/digest

release: ## make release VERSION=vX.Y.Z: static linux/amd64 and linux/arm64 binaries and SHA256SUMS in dist/ (scripts/release)
	./scripts/release $(VERSION)

check: ## the edit loop: build, vet and the unit tests (go test -short: no PostgreSQL, Mailpit or browser; those tests skip)
	go build ./... && go vet ./... && go test -short -count=1 ./...

test: ## the whole suite: installs/starts PostgreSQL and Mailpit when missing
	./scripts/test

bench: ## one seeded week end to end against a null SMTP server (README "Benchmarks"); DIGEST_DATABASE_URL or the local test database
	@if [ -z "$$DIGEST_DATABASE_URL" ]; then echo "make bench: DIGEST_DATABASE_URL is unset: using the local test database $(BENCH_TEST_DB)" >&2; fi
	go run ./cmd/digest-bench --database-url "$${DIGEST_DATABASE_URL:-$(BENCH_TEST_DB)}" $(BENCH_FLAGS)

clean:
	rm -rf bin dist outbox digest.db digest.db-* digest.db.keys
