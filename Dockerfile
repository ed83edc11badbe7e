# nftguard: one static binary (CGO_ENABLED=0, netlink only) in an empty
# image. Build: docker build -t ghcr.io/nftguard/nftguard:latest .
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -ldflags="-s -w" -o /out/nftguard ./cmd/nftguard

FROM scratch
COPY --from=build /out/nftguard /nftguard
ENTRYPOINT ["/nftguard"]
CMD ["run"]
