package app_test

import (
	"net/http"
	"testing"
)

// BenchmarkInspectorDelivery is one delivery to a guest inspector through
// the whole relay in one process (BodyProgress, the metrics, ingress, the
// recorder, the embedded log and its views): a sender's POST of 1 KiB of
// JSON with a signed webhook's headers, answered 204 once durable. Run with
// -benchmem: allocations per op are the figure a shared machine does not
// move. They include the sender's own and the views' (as
// BenchmarkProxiedDelivery's do), so compare two versions of the relay,
// not with zero.
//
//	go test -run '^$' -bench InspectorDelivery -benchmem -benchtime 5000x ./app
func BenchmarkInspectorDelivery(b *testing.B) {
	base := benchRelay(b)
	var out struct{ CreateInspector struct{ ID string } }
	gql(b, base, "", `mutation{ createInspector{ id } }`, nil, &out)
	send := webhookSender(b, base, out.CreateInspector.ID, http.StatusNoContent, nil)
	for range 200 { // warm-up: connections, the views' statements
		send()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		send()
	}
}
