# Builds the single relay binary; the console and GraphiQL are embedded.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /relay ./cmd/relay

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /relay /relay
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/relay"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--data", "/data"]
