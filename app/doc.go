// Package app is the composition root: it opens the event log and the
// views under a data folder and wires the recorder, the tunnel's hub, the
// commands service, the GraphQL API, the ingress, metrics, health routes
// and background sweeps into one http.Handler. Process concerns (flags,
// the listener, signals, profiling) stay with the caller.
package app
