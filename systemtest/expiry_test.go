package systemtest

import (
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// An inspector idle past its TTL reads expired as soon as the TTL has
// passed, with no request to find it idle first: expired is decided at read
// time from expiresAt and the clock.
func TestIdleInspectorReadsExpiredWithoutARequest(t *testing.T) {
	r := harness.Start(t, "", "--inspector-ttl", "2s")
	id, _ := createInspector(t, r)
	read := func() (bool, time.Time) {
		t.Helper()
		var out struct {
			Inspector struct {
				Expired   bool
				ExpiresAt time.Time
			}
		}
		r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ expired expiresAt } }`, map[string]any{"id": id}, &out)
		return out.Inspector.Expired, out.Inspector.ExpiresAt
	}
	harness.Eventually(t, 10*time.Second, "the idle inspector to read expired", func() bool {
		before := time.Now()
		expired, expiresAt := read()
		after := time.Now()
		switch {
		case expired && after.Before(expiresAt):
			t.Fatalf("read expired at %s, before its expiresAt %s", after, expiresAt)
		case !expired && before.After(expiresAt.Add(time.Second)):
			t.Fatalf("read alive at %s, over a second after its expiresAt %s", before, expiresAt)
		}
		return expired
	})
}
