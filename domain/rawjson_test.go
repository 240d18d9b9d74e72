package domain_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestNonUTF8BytesSurviveTheLog: a target and header values that are not
// valid UTF-8 decode to the same bytes; their JSON is frozen in a golden
// file next to the plain one, which does not change.
func TestNonUTF8BytesSurviveTheLog(t *testing.T) {
	codec := domain.NewCodec()
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	hs := []domain.Header{{Name: "X-Latin1", Value: "caf\xe9"}, {Name: "X-Plain", Value: "ok"}}
	for _, tc := range []struct {
		golden string
		event  domain.Event
	}{
		{"delivery.received.v1.non-utf8.json", domain.DeliveryReceived{DeliveryID: "d1", Address: "k3", AddressKind: domain.AddressInspector,
			Method: "GET", Target: "/caf\xe9?q=\xff", Host: "k3.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
			Headers: hs, Body: []byte{}, BodySize: 0, Complete: true,
			Trailers: []domain.Header{{Name: "X-Sum", Value: "\xfe"}}}},
		{"forward.responded.v1.non-utf8.json", domain.ForwardResponded{DeliveryID: "d1", AttemptID: "a1", Status: 200, Headers: hs, DurationMs: 1}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			data, err := codec.Encode("00000000-0000-4000-8000-000000000001", tc.event, at, domain.Trace{})
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(golden, append(data.Data, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./domain -update to create it)", err)
			}
			if !bytes.Equal(bytes.TrimSpace(want), data.Data) {
				t.Fatalf("JSON changed:\n got %s\nwant %s", data.Data, want)
			}
			back, err := codec.Decode(tc.event.EventType(), want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tc.event) {
				t.Fatalf("decoded\n %+v\nwant\n %+v", back, tc.event)
			}
		})
	}
}

// TestAnswerNotCapturedSaysWhy: an answer recorded without its body
// because of the storage quota says so in the event, frozen in a golden
// file next to the plain one, which does not change; an answer recorded
// before the field existed decodes with no reason.
func TestAnswerNotCapturedSaysWhy(t *testing.T) {
	codec := domain.NewCodec()
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	e := domain.ForwardResponded{DeliveryID: "d1", AttemptID: "a1", AgentID: "ag-2", Status: 200,
		Headers: []domain.Header{{Name: "Content-Type", Value: "text/plain"}}, BodySize: 204800, DurationMs: 3, Copy: true,
		NotCaptured: domain.NotCapturedStorageQuota}
	data, err := codec.Encode("00000000-0000-4000-8000-000000000001", e, at, domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "forward.responded.v1.not-captured.json")
	if *update {
		if err := os.WriteFile(golden, append(data.Data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./domain -update to create it)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(want), data.Data) {
		t.Fatalf("JSON changed:\n got %s\nwant %s", data.Data, want)
	}
	back, err := codec.Decode(e.EventType(), want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, e) {
		t.Fatalf("decoded\n %+v\nwant\n %+v", back, e)
	}

	old, err := os.ReadFile(filepath.Join("testdata", "forward.responded.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(old, []byte("not_captured")) {
		t.Fatal("the plain golden answer names not_captured: it must stay as events were written before")
	}
	prev, err := codec.Decode(domain.TypeForwardResponded, old)
	if err != nil {
		t.Fatal(err)
	}
	if fr := prev.(domain.ForwardResponded); fr.NotCaptured != "" || !fr.Captured || string(fr.Body) != `{"ok":true}` {
		t.Fatalf("an answer written before the reason existed decodes as %+v", fr)
	}
}

// FuzzHeaderJSON: any header value, UTF-8 or not, comes back byte for byte.
func FuzzHeaderJSON(f *testing.F) {
	f.Add("X-A", "plain")
	f.Add("X-B", "caf\xe9")
	f.Add("X-C", "\xff\x00\"\\")
	f.Fuzz(func(t *testing.T, name, value string) {
		codec := domain.NewCodec()
		e := domain.ForwardResponded{DeliveryID: "d", AttemptID: "a", Status: 200, Headers: []domain.Header{{Name: "X", Value: value}}}
		data, err := codec.Encode("id", e, time.Unix(0, 0), domain.Trace{})
		if err != nil {
			t.Fatal(err)
		}
		back, err := codec.Decode(e.EventType(), data.Data)
		if err != nil {
			t.Fatal(err)
		}
		if got := back.(domain.ForwardResponded).Headers[0].Value; got != value {
			t.Fatalf("value %q came back as %q", value, got)
		}
	})
}
