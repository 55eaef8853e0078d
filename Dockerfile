# syntax=docker/dockerfile:1
# Build stage: runs exactly `make build`, so the image carries the same binary as a local build.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=0.1.0
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    make build VERSION=${VERSION}

# Runtime stage: static binary on distroless, as a non-root user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/custom-scheduler /usr/local/bin/custom-scheduler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/custom-scheduler"]
