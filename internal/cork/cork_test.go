package cork

import (
	"bytes"
	"testing"

	"github.com/relayhq/relay/internal/cork/corktest"
)

// TestConn: frames written while corked reach the socket in one write
// with the first frame written uncorked (or at flush); a control frame is
// never held; a frame past Max sends what is held first, then itself.
func TestConn(t *testing.T) {
	data := func(s string) []byte { return append([]byte{0x82}, s...) }   // FIN, binary
	pong := func(s string) []byte { return append([]byte{0x8a}, s...) }   // FIN, pong
	close_ := func(s string) []byte { return append([]byte{0x88}, s...) } // FIN, close
	big := data(string(bytes.Repeat([]byte("x"), Max)))
	for _, tc := range []struct {
		name  string
		steps func(c *Conn)
		want  [][]byte
	}{
		{"uncorked frames go one by one", func(c *Conn) {
			c.Write(data("a"))
			c.Write(data("b"))
		}, [][]byte{data("a"), data("b")}},
		{"corked frames go with the next uncorked one", func(c *Conn) {
			c.Cork(true)
			c.Write(data("a"))
			c.Write(data("b"))
			c.Cork(false)
			c.Write(data("c"))
		}, [][]byte{append(append(data("a"), data("b")...), data("c")...)}},
		{"flush sends what is held", func(c *Conn) {
			c.Cork(true)
			c.Write(data("a"))
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			c.Write(data("b"))
		}, [][]byte{data("a"), data("b")}},
		{"a control frame is never held", func(c *Conn) {
			c.Cork(true)
			c.Write(data("a"))
			c.Write(pong("p"))
			c.Write(close_("bye"))
		}, [][]byte{append(data("a"), pong("p")...), close_("bye")}},
		{"a frame past the bound goes after what is held", func(c *Conn) {
			c.Cork(true)
			c.Write(data("a"))
			c.Write(big)
		}, [][]byte{data("a"), big}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			below := &corktest.Writes{}
			c := New(below)
			tc.steps(c)
			writes := below.All()
			if len(writes) != len(tc.want) {
				t.Fatalf("%d writes reached the socket, want %d", len(writes), len(tc.want))
			}
			for i := range tc.want {
				if !bytes.Equal(writes[i], tc.want[i]) {
					t.Errorf("write %d: %d bytes %q…, want %d bytes %q…", i, len(writes[i]), writes[i][:min(8, len(writes[i]))],
						len(tc.want[i]), tc.want[i][:min(8, len(tc.want[i]))])
				}
			}
		})
	}
}
