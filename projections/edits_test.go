package projections

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"maps"
	"runtime"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// TestAttemptsReadNoEditedBodies: a delivery's attempts are read (its
// detail, a page of its address) without the bodies its edited retries
// sent, which AttemptEditBody reads one at a time; the views keep those
// bodies compressed. Before, each edit held its body in base64 in the
// attempts view and every read of the attempts decoded all of them: 150
// edited retries of 700 KB made a read of one delivery's id take 400 MiB
// and 5 s, and 160 edits of 700 KB of one letter took 890 MB of the views'
// file while the account's quota counted 164 KB of the log.
func TestAttemptsReadNoEditedBodies(t *testing.T) {
	e := newEnv(t, Options{})
	const (
		edits = 20
		size  = 200 << 10
	)
	e.must(e.writer.receive(e.ctx, "d1", "ep1", domain.AddressEndpoint, "acc", request("/e", `{}`), t0))
	on := e.onHeldDelivery("d1")
	for i := range edits {
		body := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		on(func(d *domain.Delivery) error {
			return d.RequestRetry(fmt.Sprintf("a%d", i), "acc", domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true},
				&domain.RequestEdit{SetHeaders: []domain.Header{{Name: "X-Try", Value: fmt.Sprint(i)}}, Body: &body})
		})
	}
	e.sync(e.views)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d, err := e.views.Delivery(e.ctx, "d1")
	if err != nil {
		t.Fatal(err)
	}
	page, err := e.views.Deliveries(e.ctx, "ep1", 10, "")
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if len(d.Attempts) != edits || len(page.Items) != 1 || len(page.Items[0].Attempts) != edits {
		t.Fatalf("read %d attempts, a page of %d deliveries: want %d and 1", len(d.Attempts), len(page.Items), edits)
	}
	for _, a := range d.Attempts {
		if a.Edit == nil || a.Edit.Body != nil || a.EditBodySize == nil || *a.EditBodySize != size || len(a.Edit.SetHeaders) != 1 {
			t.Fatalf("attempt %s read as %+v, body size %v: want its edit's header, no body, and the body's size %d", a.ID, a.Edit, a.EditBodySize, size)
		}
	}
	// The two reads together allocated far less than one edited body.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size {
		t.Errorf("reading a delivery of %d edits of %d bytes and its page allocated %d bytes: the edited bodies were read", edits, size, alloc)
	}

	body, ok, err := e.views.AttemptEditBody(e.ctx, "d1", "a3")
	if err != nil || !ok || !bytes.Equal(body, bytes.Repeat([]byte{'d'}, size)) {
		t.Fatalf("the body attempt a3 sent: %d bytes, ok %v, %v; want its %d bytes of d", len(body), ok, err, size)
	}
	if _, ok, err := e.views.AttemptEditBody(e.ctx, "d1", "none"); ok || err != nil {
		t.Fatalf("an attempt that sent the recorded body: ok %v, %v; want none", ok, err)
	}

	// Stored compressed, the edits take the views about what they take the log.
	var stored int64
	if err := e.views.r.QueryRowContext(e.ctx, `SELECT COALESCE(sum(length(body)), 0) + (SELECT COALESCE(sum(length(edit)), 0) FROM attempts) FROM attempt_edits`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored > edits*(2<<10) {
		t.Errorf("%d edits of %d bytes of one letter take %d bytes of the views: want them compressed", edits, size, stored)
	}

	// A delivery's removal takes its edited bodies.
	res, err := e.store.DeleteStream(e.ctx, domain.DeliveryStream("d1"), domain.Any())
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor(e.views, res.Position)
	if _, ok, err := e.views.AttemptEditBody(e.ctx, "d1", "a3"); ok || err != nil {
		t.Fatalf("after the delivery was deleted its edited body reads: ok %v, %v", ok, err)
	}
}

// TestAttemptResponsesAreBounded: reading a delivery's attempts' responses
// from the log keeps at most MaxAttemptResponseBytes of their bodies and
// reads at most maxAttemptResponsesRead of the log (the rest are returned
// without their bodies, saying why) and, asked for some attempts, reads
// those only. Before, every response of the stream was decoded whole for
// each read: a comparison of two attempts of a delivery with 25 captured
// answers of 8 MB held 400 MiB.
func TestAttemptResponsesAreBounded(t *testing.T) {
	e := newEnv(t, Options{})
	const (
		answers = 7
		size    = 10 << 20 // seven: 70 MiB, 93 MiB in base64
	)
	e.retriedWithAnswers("d1", answers, size)
	e.sync(e.views)

	got, err := e.views.AttemptResponses(e.ctx, "d1", MaxAttemptResponseBytes)
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	why := map[string]int{}
	for id, r := range got {
		held += int64(len(r.Body))
		if want := 200 + attemptIndex(t, id); r.Status != want {
			t.Errorf("%s: status %d, want %d", id, r.Status, want)
		}
		why[r.NotRead]++
	}
	// Three bodies fit in 32 MiB; five answers of 14 MB in base64 pass
	// 64 MiB of the log.
	want := map[string]int{"": 3, NotReadTooLarge: 2, NotReadLogBytes: 2}
	if len(got) != answers || held > MaxAttemptResponseBytes || !maps.Equal(why, want) {
		t.Errorf("%d responses of %d bytes read as %d, holding %d bytes of bodies, why not: %v; want %d, at most %d bytes, %v",
			answers, size, len(got), held, why, answers, MaxAttemptResponseBytes, want)
	}

	one, err := e.views.AttemptResponses(e.ctx, "d1", MaxAttemptResponseBytes, "a6")
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := one["a6"]; len(one) != 1 || !ok || !r.Captured || !bytes.Equal(r.Body, bytes.Repeat([]byte{'g'}, size)) {
		t.Errorf("the responses of a6 alone: %d read, a6's body %d bytes captured %v; want it alone, whole", len(one), len(r.Body), r.Captured)
	}
}

// TestAttemptResponsesDecodeWhatTheyKeep: a read of some attempts'
// responses reads their answers only, and a read of every response without
// bodies decodes none: it allocates about what reading the stream does. Before,
// every answer of the stream was decoded whole for any read: a comparison
// of two attempts of a delivery with 50 captured answers of 8 MB took a
// core 3.9 s.
func TestAttemptResponsesDecodeWhatTheyKeep(t *testing.T) {
	e := newEnv(t, Options{})
	const (
		answers = 24
		size    = 1 << 20
	)
	e.retriedWithAnswers("d1", answers, size)
	e.sync(e.views)

	allocated := func(read func()) uint64 {
		t.Helper()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		read()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	stream := allocated(func() {
		if _, err := e.store.ReadStream(e.ctx, domain.DeliveryStream("d1"), 0, 1000); err != nil {
			t.Fatal(err)
		}
	})

	var two map[string]readmodel.AttemptResponse
	got := allocated(func() {
		var err error
		if two, err = e.views.AttemptResponses(e.ctx, "d1", MaxAttemptResponseBytes, "a3", "a7"); err != nil {
			t.Fatal(err)
		}
	})
	if len(two) != 2 || !bytes.Equal(two["a3"].Body, bytes.Repeat([]byte{'d'}, size)) || !bytes.Equal(two["a7"].Body, bytes.Repeat([]byte{'h'}, size)) {
		t.Fatalf("read %d responses, a3's body %d bytes, a7's %d: want those two, whole", len(two), len(two["a3"].Body), len(two["a7"].Body))
	}
	if got > stream/4 {
		t.Errorf("reading 2 of %d answers of %d bytes allocated %d bytes, reading the stream %d: unwanted answers were read", answers, size, got, stream)
	}

	// Bodies over the read's bound (a comparison's 256 KiB) are left as
	// the log holds them, not decoded.
	decoded := got
	got = allocated(func() {
		var err error
		if two, err = e.views.AttemptResponses(e.ctx, "d1", 256<<10, "a3", "a7"); err != nil {
			t.Fatal(err)
		}
	})
	for id, letter := range map[string]byte{"a3": 'd', "a7": 'h'} {
		r := two[id]
		want := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{letter}, size))
		if r.Body != nil || string(r.Encoded) != want || r.BodySize != size || !r.Captured {
			t.Errorf("%s over the bound: %d bytes of body, %d encoded, size %d, captured %v; want none, its base64, %d, captured",
				id, len(r.Body), len(r.Encoded), r.BodySize, r.Captured, size)
		}
	}
	if got+size > decoded {
		t.Errorf("reading 2 answers of %d bytes left encoded allocated %d bytes, decoded %d: they were decoded", size, got, decoded)
	}

	var all map[string]readmodel.AttemptResponse
	got = allocated(func() {
		var err error
		if all, err = e.views.AttemptResponses(e.ctx, "d1", 0); err != nil {
			t.Fatal(err)
		}
	})
	for i := range answers {
		r := all[fmt.Sprintf("a%d", i)]
		if r.Status != 200+i || !r.Captured || r.Body != nil {
			t.Errorf("a%d without bodies: status %d, captured %v, %d bytes of body; want %d, captured, none", i, r.Status, r.Captured, len(r.Body), 200+i)
		}
	}
	if got > stream+2*size {
		t.Errorf("reading %d answers of %d bytes without bodies allocated %d bytes, reading the stream %d: bodies were decoded", answers, size, got, stream)
	}
}

// retriedWithAnswers records delivery, received at an Endpoint, and
// answers retries of it: attempt ai answered with status 200+i and size
// bytes of the letter 'a'+i (mod 26), captured.
func (e *env) retriedWithAnswers(delivery string, answers, size int) {
	e.t.Helper()
	e.must(e.writer.receive(e.ctx, delivery, "ep1", domain.AddressEndpoint, "acc", request("/e", `{}`), t0))
	on := e.onHeldDelivery(delivery)
	for i := range answers {
		id := fmt.Sprintf("a%d", i)
		on(func(d *domain.Delivery) error {
			return d.RequestRetry(id, "acc", domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true}, nil)
		})
		on(func(d *domain.Delivery) error {
			d.RecordResponse(domain.ForwardResponded{AttemptID: id, Status: 200 + i, Body: bytes.Repeat([]byte{byte('a' + i%26)}, size),
				BodySize: int64(size), Captured: true, DurationMs: 1})
			return nil
		})
	}
}

// onHeldDelivery returns what runs a command on the delivery's stream, as
// writer.onDelivery does, at t0; it keeps the events it appended and folds
// them again for the next command instead of reading the stream back,
// which decoded every body before the new one for each command (for seven
// answers of 10 MiB, some 600 MB of JSON under the race detector). The
// delivery's stream may change through it only.
func (e *env) onHeldDelivery(delivery string) func(cmd func(*domain.Delivery) error) {
	e.t.Helper()
	stream := domain.DeliveryStream(delivery)
	evs, err := e.writer.load(e.ctx, stream)
	if err != nil {
		e.t.Fatal(err)
	}
	return func(cmd func(*domain.Delivery) error) {
		e.t.Helper()
		d := domain.LoadDelivery(evs)
		if err := cmd(d); err != nil {
			e.t.Fatal(err)
		}
		e.must(e.writer.save(e.ctx, stream, d.Expected(), t0, d.Changes()...))
		evs = append(evs, d.Changes()...)
	}
}

// attemptIndex is i of an attempt named ai.
func attemptIndex(t *testing.T, id string) int {
	t.Helper()
	var i int
	if _, err := fmt.Sscanf(id, "a%d", &i); err != nil {
		t.Fatalf("attempt %q: %v", id, err)
	}
	return i
}
