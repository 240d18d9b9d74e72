package sqlite

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/klauspost/compress/s2"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/sqlitedsn"
)

// receiptLike is data shaped like a delivery's receipt: headers and a
// base64 JSON body inside JSON.
func receiptLike(bodyBytes int) []byte {
	body := `{"id":"evt_1","type":"invoice.paid","data":{"object":{"lines":[` + strings.Repeat(`{"amount":1200,"currency":"usd","description":"Seat"},`, bodyBytes/55) + `{}]}}}`
	return []byte(`{"method":"POST","headers":[{"name":"Content-Type","value":"application/json"},{"name":"Stripe-Signature","value":"t=1,v1=abc"}],"body":"` +
		base64.StdEncoding.EncodeToString([]byte(body)) + `"}`)
}

func randomBase64(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return []byte(`"` + base64.StdEncoding.EncodeToString(b) + `"`)
}

// TestDataStoredCompressed appends data of every kind, reopens the log (so
// nothing comes from the tail in memory) and reads it back through every
// read: each returns the data as given, the rows keep it compressed only
// where that pays, and the chain's leaves are those of the data as given.
func TestDataStoredCompressed(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	cases := []struct {
		name    string
		data    []byte
		wantEnc int64
	}{
		{"tiny", []byte(`{"n":1}`), encRaw},
		{"receipt", receiptLike(1024), encS2},
		{"large receipt", receiptLike(200 << 10), encS2},
		{"random", randomBase64(t, 3<<10), encRaw},
		{"past compressMax", receiptLike(compressMax), encRaw},
		{"empty", []byte{}, encRaw},
	}
	s := openAt(t, path, Options{})
	for i, c := range cases {
		e := domain.EventData{ID: uuid.NewString(), Type: "test.v1", Data: c.data}
		if _, err := s.Append(ctx, fmt.Sprintf("delivery-%d", i), domain.NoStream(), e); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, c := range cases {
		var enc, size int64
		if err := db.QueryRow(`SELECT enc, length(data) FROM events WHERE stream = ?`, fmt.Sprintf("delivery-%d", i)).Scan(&enc, &size); err != nil {
			t.Fatal(err)
		}
		if enc != c.wantEnc {
			t.Errorf("%s: stored as %d, want %d", c.name, enc, c.wantEnc)
		}
		if enc == encS2 && size > int64(len(c.data))/2 {
			t.Errorf("%s: %d bytes stored for %d", c.name, size, len(c.data))
		}
	}

	s = openAt(t, path, Options{})
	defer s.Close()
	all, err := s.ReadAll(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.ReadStored(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	links, err := s.ReadChain(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := s.SubscribeAll(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	live, err := sub.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(cases) || len(stored) != len(cases) || len(links) != len(cases) || len(live) != len(cases) {
		t.Fatalf("read %d, %d stored, %d links, %d by subscription; want %d each", len(all), len(stored), len(links), len(live), len(cases))
	}
	for i, c := range cases {
		evs, err := s.ReadStream(ctx, fmt.Sprintf("delivery-%d", i), 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		for what, got := range map[string][]byte{"ReadStream": evs[0].Data, "ReadAll": all[i].Data, "ReadStored": stored[i].Data, "SubscribeAll": live[i].Data} {
			if !bytes.Equal(got, c.data) {
				t.Errorf("%s: %s returned %d bytes, want the %d given", c.name, what, len(got), len(c.data))
			}
		}
		if leaf := evidence.Leaf(stored[i]); leaf != links[i].Leaf {
			t.Errorf("%s: the chain's leaf is not the leaf of the data as given", c.name)
		}
	}
}

// TestDamagedDataIsRefused: a stored value that cannot be what the writer
// wrote is damage to the log, refused without allocating what it claims.
func TestDamagedDataIsRefused(t *testing.T) {
	huge := s2.Encode(nil, bytes.Repeat([]byte("a"), 64))
	huge = append([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, huge[1:]...) // claims 4 GiB
	over := s2.Encode(nil, bytes.Repeat([]byte("a"), compressMax+1))
	for _, c := range []struct {
		name   string
		stored []byte
		enc    int64
	}{
		{"garbage", []byte("not s2 at all"), encS2},
		{"truncated", s2.Encode(nil, receiptLike(2048))[:100], encS2},
		{"claims 4 GiB", huge, encS2},
		{"more than is ever compressed", over, encS2},
		{"unknown encoding", []byte("{}"), 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := decodeData(c.stored, c.enc)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, sqlitedsn.ErrDamagedValue) || !sqlitedsn.Damaged(err) {
				t.Fatalf("decodeData: %v, want damage", err)
			}
			// What the claim asks for is never allocated (the race
			// detector and the error text take a few KiB).
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
				t.Errorf("%d bytes allocated to refuse the value", grew)
			}
		})
	}

	// Through the store: a damaged row fails the read as damage.
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openAt(t, path, Options{})
	if _, err := s.Append(ctx, "delivery-1", domain.NoStream(), domain.EventData{ID: uuid.NewString(), Type: "test.v1", Data: receiptLike(2048)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE events SET data = X'00112233' WHERE stream = 'delivery-1'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = openAt(t, path, Options{})
	defer s.Close()
	if _, err := s.ReadStream(ctx, "delivery-1", 0, 1); !sqlitedsn.Damaged(err) {
		t.Errorf("ReadStream of a damaged row: %v, want damage", err)
	}
	if _, err := s.ReadStored(ctx, 0, 10); !sqlitedsn.Damaged(err) {
		t.Errorf("ReadStored of a damaged row: %v, want damage", err)
	}
}

// FuzzDecodeData: any stored value either decodes to at most compressMax
// bytes or is refused as damage, and whatever encodeData stores decodes to
// what it was given.
func FuzzDecodeData(f *testing.F) {
	f.Add(receiptLike(512))
	f.Add(s2.Encode(nil, receiptLike(512)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := decodeData(b, encS2)
		if err != nil && !errors.Is(err, sqlitedsn.ErrDamagedValue) {
			t.Fatalf("error not damage: %v", err)
		}
		if err == nil && len(out) > compressMax {
			t.Fatalf("decoded %d bytes", len(out))
		}
		stored, enc := encodeData(b)
		back, err := decodeData(stored, enc)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("round trip: %v, equal %v", err, bytes.Equal(back, b))
		}
	})
}
