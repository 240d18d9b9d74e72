// Package metrics exposes the relay's Prometheus metrics at /metrics on the
// bare domain: request counts and latencies of public addresses and of the
// API, the Go runtime, and how far the views are behind the log.
package metrics
