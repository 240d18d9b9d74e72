package wsgql

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/internal/testwait"
)

type accountCtxKey struct{}

// TestOneAddressHoldsItsShareOfTheBudget: agents' sockets from one client
// address, each signed in to an account of its own (sign-up is open),
// that each send the start of a large message and stall inside its frame
// hold the body budget under their address's share, not each account's
// alone: the PROXY bodies of other addresses still find room. Before, the
// messages were reserved under the account only, which has no network:
// twenty accounts from 127.0.0.1, 2 MiB each, held the whole 32 MiB
// budget until their read deadline, and a body of another address was
// refused; now they hold 7.8 MiB, within the address's quarter (8 MiB),
// and it is admitted.
func TestOneAddressHoldsItsShareOfTheBudget(t *testing.T) {
	const total, maxBody = 32 << 20, 1 << 20
	b := ingress.NewBodyBudget(total, maxBody)
	var executed atomic.Int64
	cfg := Config{
		MaxMessage: 1 << 20, MessageLimit: func(context.Context) int64 { return 16 << 20 },
		MaxSocketsPerClient: 32, Budget: b,
		InitFunc: func(ctx context.Context, p map[string]any) (context.Context, error) {
			return context.WithValue(ctx, accountCtxKey{}, p["account"]), nil
		},
		BudgetKey: func(ctx context.Context) string {
			a, _ := ctx.Value(accountCtxKey{}).(string)
			return "account:" + a
		},
	}
	url, _ := serve(t, answerServer(make(chan struct{}), &executed, cfg))
	// Each socket sends 2.5 MiB of one frame, then nothing: the bytes past
	// 1 MiB are reserved as read, 64 KiB at a time (up to 1.5 MiB, under a sixteenth of
	// the budget, so the reserve admits them too), and held until the read
	// deadline (2 × KeepAlive).
	head := append([]byte(`{"id":"1","type":"subscribe","payload":{"query":"mutation($b: String!){ completeForward(body: $b) }","variables":{"b":"`),
		bytes.Repeat([]byte("x"), 5<<19)...)
	frame := wsFrameHeader(int64(len(head) + 16))
	var conns []*websocket.Conn
	for i := range 20 {
		c := dialAccount(t, url, strconv.Itoa(i))
		conns = append(conns, c)
		nc := c.NetConn()
		if _, err := nc.Write(append(append([]byte{}, frame...), maskedPayload(head)...)); err != nil {
			t.Fatal(err)
		}
	}
	var held int64
	testwait.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if held = b.InUse(); held < 7<<20 {
			return fmt.Errorf("%d bytes held so far", held)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // the rest of what they sent
	held = b.InUse()
	other := b.ReserveFor("10.9.8.7", "", maxBody+1)
	t.Logf("20 accounts' stalled frames from one address hold %d of %d bytes; a body of another address admitted: %v", held, int64(total), other)
	if held > total/4 {
		t.Errorf("one address's stalled messages hold %d bytes of the budget, want at most its quarter (%d)", held, int64(total/4))
	}
	if !other {
		t.Errorf("a body of another address was refused while one address's stalled messages hold the budget")
	} else {
		b.ReleaseFor("10.9.8.7", "", maxBody+1)
	}
	// Sockets closed inside their frames give back all they held.
	for _, c := range conns {
		c.Close()
	}
	testwait.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if n := b.InUse(); n != 0 {
			return fmt.Errorf("%d bytes of the budget held once the sockets closed", n)
		}
		return nil
	})
}

// dialAccount dials as an agent of account.
func dialAccount(t *testing.T, url, account string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{gqlws.Subprotocol}}
	c, _, err := d.Dial(url, http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"account": account}}); err != nil {
		t.Fatal(err)
	}
	var ack message
	if err := c.ReadJSON(&ack); err != nil || ack.Type != gqlws.ConnectionAck {
		t.Fatalf("ack: %v %+v", err, ack)
	}
	return c
}

// wsFrameHeader is a final, masked text frame's header declaring n bytes,
// its mask key all zeroes (so the payload goes as is).
func wsFrameHeader(n int64) []byte {
	h := []byte{0x81, 0x80 | 127}
	for i := 7; i >= 0; i-- {
		h = append(h, byte(n>>(8*i)))
	}
	return append(h, 0, 0, 0, 0)
}

func maskedPayload(p []byte) []byte { return p } // a zero mask leaves it as is
