package projections

import (
	"strconv"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// TestAddressCacheBoundsAnswerBytes: rows with large own answers start the
// cache over before it holds more than addressCacheBytes of them, and a
// row dropped or replaced gives its bytes back.
func TestAddressCacheBoundsAnswerBytes(t *testing.T) {
	var c addressCache
	big := readmodel.Address{Answers: readmodel.Answers{Answer: &domain.Answer{Status: 200, Body: make([]byte, domain.MaxAnswerBody)}}}
	for i := range 1000 {
		c.put("a"+strconv.Itoa(i), big, c.gen)
		if c.bytes > addressCacheBytes {
			t.Fatalf("after %d rows the cache holds %d answer bytes, over %d", i+1, c.bytes, addressCacheBytes)
		}
	}
	if n := len(c.m); n == 0 || n >= 1000 {
		t.Fatalf("%d rows cached", n)
	}
	c.clear()
	c.put("x", big, c.gen)
	c.put("x", big, c.gen)
	if c.bytes != int64(domain.MaxAnswerBody) {
		t.Errorf("a row put twice counts %d bytes, want %d", c.bytes, domain.MaxAnswerBody)
	}
	c.committed([]string{"x"}, nil, nil)
	if c.bytes != 0 || len(c.m) != 0 {
		t.Errorf("after the row changed: %d bytes, %d rows", c.bytes, len(c.m))
	}
}
