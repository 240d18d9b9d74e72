package commands

import "testing"

// SweepEndpoints is how many Endpoints one retention sweep decides on.
const SweepEndpoints = sweepEndpoints

// SmallEndpointSweeps makes each sweep of Endpoints' retention delete at
// most pages pages of streams streams, until the test ends.
func SmallEndpointSweeps(t *testing.T, pages, streams int) {
	t.Helper()
	p, s := sweepEndpointPages, sweepEndpointStreams
	sweepEndpointPages, sweepEndpointStreams = pages, streams
	t.Cleanup(func() { sweepEndpointPages, sweepEndpointStreams = p, s })
}
