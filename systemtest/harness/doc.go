// Package harness runs the real relay binary for end-to-end tests: it builds
// `relay` once, starts `relay serve` on a free 127.0.0.1 port with a temp data
// folder, talks to it over raw HTTP, GraphQL and graphql-transport-ws, and
// stops or kills only the processes it started.
package harness
