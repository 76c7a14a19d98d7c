# syntax=docker/dockerfile:1
#
# The digest job as a static, non-root image:
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse HEAD) \
#     --build-arg BUILD_TIME=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ) \
#     -t digest .
# The context has no .git: the three arguments are what "digest version"
# prints and what the OCI labels say (BUILD_TIME is the commit's time, so a
# rebuild of a commit gives the same binary).
# One image runs both commands: the CronJob's "digest run" and the
# Deployment's "digest serve" (the entrypoint is digest; the command is an arg).
#
# deploy/docker_test.go performs this build without a Docker engine: it
# copies what the COPY lines name (less .dockerignore) into an empty
# directory, runs the RUN lines there with VERSION set, checks that the go
# build flags equal the Makefile's "build" target, and that "digest version"
# prints the stamped version, commit and time. Keep the RUN lines plain shell for that.
#
# Both base images are pinned by digest (a tag moves; a digest is the image
# that was reviewed), with the tag kept for the reader. To move to a newer
# patch release, look the digest up and replace it (and the base.digest
# label below):
#   crane digest golang:1.26
#   crane digest gcr.io/distroless/static-debian12:nonroot

FROM golang:1.26@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY digest ./digest
COPY internal ./internal
COPY ledger ./ledger
COPY listen ./listen
COPY migrations ./migrations
COPY run ./run
COPY sender ./sender
COPY snapshot ./snapshot
COPY templates ./templates
COPY unsubscribe ./unsubscribe
COPY webhook ./webhook
COPY weekstatus ./weekstatus
COPY verify ./verify
ARG VERSION=devel
ARG COMMIT
ARG BUILD_TIME
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.buildTime=${BUILD_TIME}" -o bin/digest ./cmd/digest

# distroless/static: CA certificates, /etc/passwd with nonroot (65532), no
# shell. Time-zone data is compiled into the binary (time/tzdata).
FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
ARG VERSION=devel
ARG COMMIT
ARG BUILD_TIME
LABEL org.opencontainers.image.title="digest" \
      org.opencontainers.image.description="Weekly account-activity digest by email, never the same digest twice" \
      org.opencontainers.image.source="https://github.com/weeklydigest/digest" \
      org.opencontainers.image.documentation="https://github.com/weeklydigest/digest/blob/main/docs/operations.md" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.created="${BUILD_TIME}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="gcr.io/distroless/static-debian12:nonroot" \
      org.opencontainers.image.base.digest="sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab"
COPY --from=build /src/bin/digest /usr/local/bin/digest
USER 65532:65532
ENTRYPOINT ["digest"]
CMD ["--help"]
