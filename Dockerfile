# nftguard: one static binary (CGO_ENABLED=0, netlink only) in an empty
# image, for builders that reach the registry of the golang image:
#
#   docker build --build-arg VERSION=$(cat VERSION) --build-arg REVISION=$(git rev-parse HEAD) \
#     -t ghcr.io/nftguard/nftguard:$(cat VERSION) .
#
# `make image` builds the same image offline (hack/image: the OCI layout and
# an archive for podman load / ctr images import, amd64 and arm64,
# reproducible). Both make the same layout: the binary at /nftguard, built
# with the same flags, as the entrypoint, "run" the default argument, no
# USER (root, with every capability but NET_ADMIN dropped by the DaemonSet).
# e2e TestImage compares this final stage with hack/image's image.
FROM golang:1.26.8 AS build
ARG VERSION=devel
ARG REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
      -o /out/nftguard ./cmd/nftguard

FROM scratch
ARG VERSION=devel
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/nftguard/nftguard" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/nftguard /nftguard
ENTRYPOINT ["/nftguard"]
CMD ["run"]
