# Builds the single relay binary; the console and GraphiQL are embedded.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /relay ./cmd/relay
# /keys: where the nodes of a cluster mount their shared keys (secrets and
# checkpoint keys); owned by the nonroot user so a new volume there is
# writable and the first node to start can create them.
RUN mkdir -p /out/keys

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /relay /relay
COPY --from=build --chown=65532:65532 /out/keys /keys
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/relay"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--data", "/data"]
