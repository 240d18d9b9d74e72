package ingress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

func TestWantsStream(t *testing.T) {
	for _, tc := range []struct {
		method, accept string
		want           bool
	}{
		{"GET", "text/event-stream", true},
		{"GET", "text/html, text/event-stream;q=0.9", true},
		{"GET", "TEXT/EVENT-STREAM", true},
		{"GET", "", false},
		{"GET", "text/event-streams", false},
		{"POST", "text/event-stream", false},
		{"HEAD", "text/event-stream", false},
	} {
		r, _ := http.NewRequest(tc.method, "http://a.localhost/", nil)
		if tc.accept != "" {
			r.Header.Set("Accept", tc.accept)
		}
		if got := wantsStream(r); got != tc.want {
			t.Errorf("%s Accept %q: %v, want %v", tc.method, tc.accept, got, tc.want)
		}
	}
}

// parseEvent splits one encoded event into its id and data.
func parseEvent(t *testing.T, ev []byte) (id string, data map[string]any) {
	t.Helper()
	s := string(ev)
	if !strings.HasSuffix(s, "\n\n") || strings.Count(s, "\n") != 4 {
		t.Fatalf("event %q is not three lines and a blank one", s)
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n\n"), "\n")
	if !strings.HasPrefix(lines[0], "id: ") || lines[1] != "event: message" || !strings.HasPrefix(lines[2], "data: ") {
		t.Fatalf("event %q", s)
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[2], "data: ")), &data); err != nil {
		t.Fatalf("data of %q: %v", s, err)
	}
	return strings.TrimPrefix(lines[0], "id: "), data
}

func TestSmeeEvent(t *testing.T) {
	at := time.UnixMilli(1700000000123)
	base := readmodel.Delivery{Cursor: "ZDE6NQ", Target: "/hook?a=1&b=2&b=3", Host: "x.localhost", ReceivedAt: at, Complete: true}
	for _, tc := range []struct {
		name     string
		headers  []domain.Header
		body     string
		complete bool
		wantBody string // the data's body, as JSON
		why      string // x-relay-smee-body prefix, "" for none
	}{
		{"json kept as sent, whitespace out", []domain.Header{{Name: "Content-Type", Value: "application/json"}},
			"{ \"z\": 1, \"a\": [1.50, \"<&>\"] }", true, `{"z":1,"a":[1.50,"<&>"]}`, ""},
		{"form", []domain.Header{{Name: "Content-Type", Value: "application/x-www-form-urlencoded"}},
			"payload=%7B%7D&x=1&x=2", true, `{"payload":"{}","x":["1","2"]}`, ""},
		{"binary", nil, "\xff\x00", true, `{}`, "omitted: not JSON"},
		{"empty", nil, "", true, `{}`, ""},
		{"incomplete", []domain.Header{{Name: "Content-Type", Value: "application/json"}}, `{"a":`, false, `{}`, "omitted: larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := base
			d.Headers = append([]domain.Header{{Name: "X-GitHub-Event", Value: "push"}, {Name: "X-Dup", Value: "1"},
				{Name: "x-dup", Value: "2"}, {Name: "Connection", Value: "close"}}, tc.headers...)
			d.Body, d.Complete = []byte(tc.body), tc.complete
			ev, err := smeeEvent(d, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			id, data := parseEvent(t, ev)
			if id != "ZDE6NQ" {
				t.Errorf("id %q", id)
			}
			if data["x-github-event"] != "push" || data["x-dup"] != "1, 2" || data["connection"] != nil || data["host"] != "x.localhost" {
				t.Errorf("headers in %v", data)
			}
			if q := data["query"].(map[string]any); q["a"] != "1" || len(q["b"].([]any)) != 2 {
				t.Errorf("query %v", q)
			}
			if data["timestamp"] != float64(at.UnixMilli()) {
				t.Errorf("timestamp %v", data["timestamp"])
			}
			body, _ := json.Marshal(data["body"])
			var want any
			_ = json.Unmarshal([]byte(tc.wantBody), &want)
			wantJSON, _ := json.Marshal(want)
			if !bytes.Equal(body, wantJSON) {
				t.Errorf("body %s, want %s", body, wantJSON)
			}
			why, _ := data["x-relay-smee-body"].(string)
			if (tc.why == "") != (why == "") || !strings.HasPrefix(why, tc.why) {
				t.Errorf("x-relay-smee-body %q, want %q…", why, tc.why)
			}
			// JSON is carried byte for byte (whitespace aside).
			if tc.name == "json kept as sent, whitespace out" && !bytes.Contains(ev, []byte(`"body":`+tc.wantBody)) {
				t.Errorf("event %s does not carry the body as sent", ev)
			}
		})
	}
}

// TestSmeeEventCap: an event that would exceed the cap goes without its
// body, and says so.
func TestSmeeEventCap(t *testing.T) {
	d := readmodel.Delivery{Cursor: "c", Target: "/", Complete: true, Body: []byte(`["` + strings.Repeat("x", 4096) + `"]`)}
	ev, err := smeeEvent(d, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) > 1024 {
		t.Fatalf("event of %d bytes, cap 1024", len(ev))
	}
	_, data := parseEvent(t, ev)
	if why, _ := data["x-relay-smee-body"].(string); !strings.HasPrefix(why, "omitted: the event would exceed") {
		t.Errorf("x-relay-smee-body %q", why)
	}
}

// FuzzSmeeEvent: whatever a sender sends, its event is one SSE event whose
// data is one line of JSON (an event split across lines, or a body that
// breaks out of its field, would corrupt the stream for every client).
func FuzzSmeeEvent(f *testing.F) {
	f.Add("application/json", "/?a=1", []byte(`{"a":"b\n"}`), "v")
	f.Add("application/x-www-form-urlencoded", "/?%zz", []byte("a=%0A&b"), "x\ny")
	f.Add("text/plain", "/", []byte("\n\ndata: x\n\n"), "")
	f.Fuzz(func(t *testing.T, ctype, target string, body []byte, value string) {
		d := readmodel.Delivery{Cursor: "c", Target: target, Complete: true, Body: body,
			Headers: []domain.Header{{Name: "Content-Type", Value: ctype}, {Name: "X-V", Value: value}}}
		ev, err := smeeEvent(d, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		parseEvent(t, ev)
	})
}

// TestStreamSlots: streams are refused beyond MaxStreamsPerAddress on one
// address, beyond MaxStreamsPerClient from one client over any addresses,
// and beyond the relay-wide maximum, and released slots are free again.
func TestStreamSlots(t *testing.T) {
	s := streamSlots{max: MaxStreamsPerAddress + 2 + MaxStreamsPerClient}
	for i := range MaxStreamsPerAddress {
		if ok, why := s.acquire("a", fmt.Sprint("client-", i)); !ok {
			t.Fatalf("stream %d on a refused: %s", i, why)
		}
	}
	if ok, _ := s.acquire("a", "another"); ok {
		t.Fatalf("stream %d on one address admitted", MaxStreamsPerAddress+1)
	}
	for i := range MaxStreamsPerClient {
		if ok, why := s.acquire(fmt.Sprint("e", i), "one"); !ok {
			t.Fatalf("stream %d of one client refused: %s", i, why)
		}
	}
	if ok, why := s.acquire("e-next", "one"); ok || !strings.Contains(why, "from your address") {
		t.Fatalf("stream %d of one client over many addresses: %v %q", MaxStreamsPerClient+1, ok, why)
	}
	s.release("e0", "one")
	if ok, why := s.acquire("e-next", "one"); !ok {
		t.Fatalf("a client's released slot stays taken: %s", why)
	}
	for _, addr := range []string{"b", "c"} {
		if ok, why := s.acquire(addr, addr); !ok {
			t.Fatalf("stream on %s refused: %s", addr, why)
		}
	}
	if ok, why := s.acquire("d", "d"); ok || !strings.Contains(why, "relay") {
		t.Fatalf("stream beyond the relay-wide maximum: %v %q", ok, why)
	}
	s.release("a", "client-0")
	if ok, why := s.acquire("d", "d"); !ok {
		t.Fatalf("a released slot stays taken: %s", why)
	}
	if s.byAddr["a"] != MaxStreamsPerAddress-1 || s.total != s.max || s.clients.Held("client-0") != 0 || s.clients.Held("one") != MaxStreamsPerClient {
		t.Fatalf("counts %v, one %d, total %d", s.byAddr, s.clients.Held("one"), s.total)
	}
}

// TestSmeeEventJoinsRepeatsOnce: a header sent 200 times (the most values
// stored) becomes one field, its values joined with ", " in order, and
// building the event allocates a few times the headers' size. Before, each
// value was joined onto the line so far: 200 values of 320 bytes (64 KB)
// allocated 7.2 MB for one event; now 0.15 MB.
func TestSmeeEventJoinsRepeatsOnce(t *testing.T) {
	const values, size = 200, 320
	d := readmodel.Delivery{Cursor: "c", Target: "/", Complete: true, Body: []byte(`{}`)}
	var want []string
	for i := range values {
		v := fmt.Sprintf("%03d", i) + strings.Repeat("v", size-3)
		d.Headers = append(d.Headers, domain.Header{Name: "X-Repeat", Value: v})
		want = append(want, v)
	}
	ev, err := smeeEvent(d, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	_, data := parseEvent(t, ev)
	if got, _ := data["x-repeat"].(string); got != strings.Join(want, ", ") {
		t.Fatalf("x-repeat is %d bytes, want the %d values joined in order", len(got), values)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := smeeEvent(d, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	perEvent := (after.TotalAlloc - before.TotalAlloc) / 10
	t.Logf("%d bytes allocated an event", perEvent)
	if most := uint64(8 * values * size); perEvent > most {
		t.Errorf("an event of %d header values of %d bytes allocated %d bytes, want at most %d (8 times the headers)", values, size, perEvent, most)
	}
}

// TestStreamSlotsKeepAReserve: networks that hold many streams leave the
// relay's last quarter to networks that hold few. Before, 8 networks of
// 512 streams held all 4 096, and a stream from any other network was
// refused until one of theirs ended.
func TestStreamSlotsKeepAReserve(t *testing.T) {
	s := &New(Config{}, Deps{}).streams // as a relay's are
	taken := 0
	// Busy networks, each from as many clients as it takes to hold its
	// cap: 8 of them would hold every stream.
	for n := 0; n < 8 && taken < s.max; n++ {
		for i := 0; i < MaxStreamsPerNetwork; i++ {
			client := fmt.Sprintf("10.0.%d.%d", n, i/MaxStreamsPerClient)
			if ok, _ := s.acquire(fmt.Sprintf("busy-%d-%d", n, i%MaxStreamsPerAddress), client); !ok {
				break
			}
			taken++
		}
	}
	t.Logf("8 busy networks hold %d of %d streams", taken, s.max)
	if most := s.max - s.reserved + 7*StreamsSmallHolding; taken > most {
		t.Errorf("busy networks hold %d streams, want at most %d: the reserve is %d", taken, most, s.reserved)
	}
	// Networks of a team's few clients each still open theirs.
	for n := range 40 {
		for i := range StreamsSmallHolding {
			if ok, why := s.acquire(fmt.Sprintf("team-%d", n), fmt.Sprintf("192.168.%d.%d", n, i)); !ok {
				t.Fatalf("stream %d of a network of few (%d) refused: %s", i, n, why)
			}
		}
	}
	if ok, why := s.acquire("team-0", "192.168.0.200"); ok || !strings.Contains(why, "kept for networks") {
		t.Errorf("a network past %d streams took from the reserve: %v %q", StreamsSmallHolding, ok, why)
	}
}
