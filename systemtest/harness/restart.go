package harness

import "testing"

// RestartSamePort starts the relay again on the same data folder and on the
// same port, trying again while the port is still taken. Restart moves to
// another port in that case, but a connected agent only knows the old one:
// reconnect tests need the address to stay put.
func (r *Relay) RestartSamePort(t testing.TB) {
	t.Helper()
	const tries = 20
	for attempt := 0; attempt < tries; attempt++ {
		ok, err := r.launch()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
	}
	t.Fatalf("port %d stayed in use over %d restarts", r.Port, tries)
}
