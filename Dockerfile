# syntax=docker/dockerfile:1
#
# The digest job as a static, non-root image:
#   docker build --build-arg VERSION=$(git describe --tags --always) -t digest .
#
# deploy/docker_test.go performs this build without a Docker engine: it
# copies what the COPY lines name (less .dockerignore) into an empty
# directory, runs the RUN lines there with VERSION set, checks that the go
# build flags equal the Makefile's "build" target, and that "digest version"
# prints the stamped version. Keep the RUN lines plain shell for that.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY digest ./digest
COPY internal ./internal
COPY ledger ./ledger
COPY migrations ./migrations
COPY sender ./sender
COPY snapshot ./snapshot
COPY templates ./templates
COPY unsubscribe ./unsubscribe
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o bin/digest ./cmd/digest

# distroless/static: CA certificates, /etc/passwd with nonroot (65532), no
# shell. Time-zone data is compiled into the binary (time/tzdata).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/digest /usr/local/bin/digest
USER 65532:65532
ENTRYPOINT ["digest"]
CMD ["--help"]
