package systemtest

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/agentwire"
	"github.com/relayhq/relay/systemtest/harness"
)

// headerBombComplete is a Complete frame of about size bytes made of empty
// headers (two bytes each) for an attempt the relay never sent.
func headerBombComplete(size int) []byte {
	n := (size - 32) / 2
	f := []byte{agentwire.KindComplete}
	f = binary.AppendUvarint(f, 7)
	f = append(f, "unknown"...)
	f = binary.AppendVarint(f, 200)
	f = binary.AppendUvarint(f, uint64(n))
	f = append(f, make([]byte, 2*n)...)
	f = binary.AppendUvarint(f, 0) // body
	f = binary.AppendUvarint(f, 0) // error
	f = binary.AppendUvarint(f, 0) // failure
	f = binary.AppendVarint(f, 0)  // duration
	return f
}

// TestAgentCompleteFrameHeadersAreBounded: an account's agent sends, on 4
// sockets at once, one Complete frame each of 14 MiB (under the token
// socket's read limit, ≈14.3 MiB) made of empty headers, for an attempt
// that does not exist. The relay refuses each as a frame that does not
// decode (past agentwire.MaxAnswerHeaders: the socket closes with 4400),
// grows by little more than the frames themselves, and serves the
// account's next socket. Before the bound it
// decoded each into a []domain.Header of 7 million entries (32 bytes
// each) and grew by 960 MiB.
func TestAgentCompleteFrameHeadersAreBounded(t *testing.T) {
	r := harness.Start(t, "")
	a := signUpTenant(t, r, "bomb")
	const sockets = 4
	agents := make([]*binaryAgent, sockets)
	for i := range agents {
		agents[i] = dialBinary(t, r, a.Token)
	}
	frame := headerBombComplete(14 << 20)
	time.Sleep(500 * time.Millisecond)
	base := resetHWM(t, r.PID())
	var wg sync.WaitGroup
	for _, ag := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = ag.conn.WriteMessage(websocket.BinaryMessage, frame)
		}()
	}
	wg.Wait()
	for _, ag := range agents {
		if code := ag.closedWith(); code != 4400 {
			t.Errorf("socket closed with %d, want 4400", code)
		}
	}
	peak := procHWMKiB(t, r.PID())
	// The account's next socket is served as before.
	next := dialBinary(t, r, a.Token)
	next.binary(agentwire.AppendComplete(nil, agentwire.Complete{AttemptID: "unknown", Status: 200}))
	if d := next.done(); d.Code != "NOT_FOUND" {
		t.Errorf("a report on a new socket: %+v, want NOT_FOUND", d)
	}
	t.Logf("%d frames of %d MiB: relay RSS %d MiB → peak %d MiB (+%d MiB)", sockets, len(frame)>>20, base>>10, peak>>10, (peak-base)>>10)
	// What the frames themselves are, twice over, and some slack.
	if grow := (peak - base) >> 10; grow > 2*sockets*(len(frame)>>20)+64 {
		t.Errorf("the relay grew %d MiB reading %d refused frames of %d MiB", grow, sockets, len(frame)>>20)
	}
}
