package domain_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

var update = flag.Bool("update", false, "rewrite golden files")

// samples holds one filled payload of every event type; their JSON is frozen
// in testdata/ so a change to a stored format is always deliberate.
func samples() []domain.Event {
	status := []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Repeat", Value: "a"}, {Name: "X-Repeat", Value: "b"}}
	return []domain.Event{
		domain.InspectorCreated{InspectorID: "k3x9q2", IdleTTLMs: 86400000},
		domain.InspectorExpired{InspectorID: "k3x9q2", LastActivityAt: "2026-11-21T10:00:00.123456789Z"},
		domain.AccountCreated{AccountID: "acc-1", Name: "Ada"},
		domain.AccountQuotaSet{AccountID: "acc-1", StorageBytes: 5 << 30, Rate: "100/s", APICost: "600000/min"},
		domain.AccountSnapshot{AccountID: "acc-1", Name: "Ada",
			Tokens:  []domain.AccountTokenState{{ID: "tok-1"}, {ID: "tok-3", MemberID: "mem-1", Session: true}},
			Members: []domain.MemberState{{ID: "mem-1", Role: "owner"}},
			Invites: []domain.MemberInviteState{{ID: "minv-1", Role: "member", By: "mem-1", ExpiresAt: "2026-11-28T10:00:00Z"}},
			Quota:   &domain.AccountQuotaSet{AccountID: "acc-1", StorageBytes: 5 << 30, Rate: "100/s"}},
		domain.TokenIssued{AccountID: "acc-1", TokenID: "tok-1", TokenHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			Name: "laptop", ExpiresAt: "2026-12-21T10:00:00Z", MemberID: "mem-1", Kind: "session"},
		domain.TokenRevoked{AccountID: "acc-1", TokenID: "tok-1", By: "mem-1"},
		domain.TokenUsed{AccountID: "acc-1", TokenID: "tok-1", At: "2026-11-21T10:00:00.123456789Z"},
		domain.DeviceCodeRequested{DeviceID: "dev-1", DeviceCodeHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			UserCodeHash: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", ClientName: "laptop.local", ExpiresAt: "2026-11-21T10:10:00Z"},
		domain.DeviceApproved{DeviceID: "dev-1", AccountID: "acc-1", MemberID: "mem-1"},
		domain.DeviceDenied{DeviceID: "dev-1", AccountID: "acc-1"},
		domain.DeviceRedeemed{DeviceID: "dev-1", AccountID: "acc-1", TokenID: "tok-2"},
		domain.InviteCreated{InviteID: "inv-1", CodeHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", CreatedBy: "acc-1", ExpiresAt: "2026-11-28T10:00:00Z"},
		domain.InviteUsed{InviteID: "inv-1", AccountID: "acc-2"},
		domain.MemberJoined{AccountID: "acc-1", MemberID: "mem-2", Login: "Ada@example.com", Role: "member",
			PasswordSealed: "aes256gcm:v1:0f1e2d3c4b5a6978:AAAA", By: "mem-1", InviteID: "minv-1"},
		domain.MemberRemoved{AccountID: "acc-1", MemberID: "mem-2", By: "mem-1"},
		domain.MemberRoleChanged{AccountID: "acc-1", MemberID: "mem-2", Role: "owner", By: "mem-1"},
		domain.MemberPasswordChanged{AccountID: "acc-1", MemberID: "mem-2", PasswordSealed: "aes256gcm:v1:0f1e2d3c4b5a6978:AAAA"},
		domain.MemberInvited{AccountID: "acc-1", InviteID: "minv-1", CodeHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Role: "member", By: "mem-1", ExpiresAt: "2026-11-28T10:00:00Z"},
		domain.MemberInviteUsed{AccountID: "acc-1", InviteID: "minv-1", MemberID: "mem-2"},
		domain.LoginClaimed{AccountID: "acc-1", MemberID: "mem-2"},
		domain.LoginReleased{AccountID: "acc-1", MemberID: "mem-2"},
		domain.EndpointCreated{EndpointID: "ep1", AccountID: "acc-1", Name: "stripe", Mode: domain.ModeProxy, Target: "127.0.0.1:3000", ResponseCapture: true, By: "mem-1"},
		domain.EndpointReconfigured{EndpointID: "ep1", Name: "stripe", Mode: domain.ModeLog, By: "mem-1"},
		domain.EndpointDeleted{EndpointID: "ep1", By: "mem-1"},
		domain.EndpointSmeeKeySet{EndpointID: "ep1", KeyHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", By: "mem-1"},
		domain.AgentConnected{EndpointID: "ep1", AgentID: "ag-1", Target: "127.0.0.1:3000", Node: "n1"},
		domain.AgentDisconnected{EndpointID: "ep1", AgentID: "ag-1", Reason: "connection lost"},
		domain.PrimaryChanged{EndpointID: "ep1", AgentID: "ag-2", Previous: "ag-1", Reason: domain.PrimaryLeft},
		domain.ListenersSnapshot{EndpointID: "ep1", Open: []domain.ListenerSession{{AgentID: "ag-2"}, {AgentID: "ag-3", Asked: true}}, Primary: "ag-3"},
		domain.DeliveryReceived{DeliveryID: "d1", Address: "ep1", AddressKind: domain.AddressEndpoint, AccountID: "acc-1", Method: "POST",
			Target: "/a%2Fb?x=1&x=2", Host: "ep1.localhost:8080", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:5000",
			Headers: status, Body: []byte{0, 1, 2, 0xff}, BodySize: 10, Complete: false, DroppedHeaders: 3, RedactedQuery: []string{"hub.verify_token"},
			Answer:   &domain.ReceiptAnswer{Status: 413, Reason: "body larger than 10 bytes"},
			Provider: &domain.Provider{Name: "github", EventType: "push", DeliveryID: "72d3162e"}},
		domain.DeliveryAnswered{DeliveryID: "d1", Status: 503, Reason: "no agent connected"},
		domain.DeliveryRetryScheduled{DeliveryID: "d1", AttemptID: "a2", Failures: 3, NextAt: "2026-11-21T12:04:10.000Z", Reason: "503 no agent connected"},
		domain.DeliveryDead{DeliveryID: "d1", AttemptID: "a2", Failures: 8, Reason: "8 attempts failed; last: 500"},
		domain.DeliveryDelivered{DeliveryID: "d1", AttemptID: "a2", Status: 200},
		domain.DeliveryRequeued{DeliveryID: "d1", AccountID: "acc-1", By: "mem-1"},
		domain.ForwardRequested{DeliveryID: "d1", AttemptID: "a2", EndpointID: "ep1", Retry: true, Node: "n1", Edit: &domain.RequestEdit{Method: "PUT", Target: "/b",
			SetHeaders: []domain.Header{{Name: "X-Debug", Value: "1"}}, UnsetHeaders: []string{"X-Sig"}, Body: &[]byte{'{', '}'}}},
		domain.ForwardResponded{DeliveryID: "d1", AttemptID: "a1", AgentID: "ag-1", Status: 201, Headers: status, Body: []byte(`{"ok":true}`), BodySize: 11, Captured: true, DurationMs: 12, Signature: "stripe valid",
			Fidelity: &domain.Fidelity{Agent: domain.DigestRequest("POST", "/hook", nil, []byte("{}")), Relay: domain.DigestRequest("POST", "/hook", nil, []byte("{ }"))}},
		domain.ForwardFailed{DeliveryID: "d1", AttemptID: "a1", AgentID: "ag-1", Status: 502, Error: "nothing listening at 127.0.0.1:3000", DurationMs: 1},
		domain.RetryRequested{DeliveryID: "d1", AttemptID: "a2", AccountID: "acc-1"},
		domain.InspectorPurged{InspectorID: "k3x9q2", LastActivityAt: "2026-11-21T10:00:00.123456789Z", RetentionMs: 604800000, Deliveries: 3},
		domain.EndpointRetained{EndpointID: "e7", RetentionMs: 604800000, Cutoff: "2026-11-14T10:00:00.123456789Z",
			LastActivityAt: "2026-11-21T09:59:00Z", Deliveries: 12},
		domain.AddressRateLimited{Address: "k3x9q2", AddressKind: domain.AddressInspector, Refused: 120,
			From: "2026-11-21T10:00:00.123456789Z", To: "2026-11-21T10:00:09.5Z"},
		domain.StreamDeleted{Stream: "delivery-d1", Events: 4, LastRevision: 3, LastPosition: 42},
		domain.InspectorAnswerSet{InspectorID: "k3x9q2", Answer: &domain.Answer{Status: 200, Headers: []domain.Header{{Name: "Content-Type", Value: "text/plain"}}, Body: []byte("ok")},
			Handshakes: &domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeSlack, domain.HandshakeZoom},
				MetaVerifyTokenMAC: "hmac-sha256:v1:0f1e2d3c4b5a6978:5f0b", ZoomSecretSealed: "aes256gcm:v1:0f1e2d3c4b5a6978:AAAA", InProxy: domain.HandshakesRelay}},
		domain.LogCheckpointed{Position: 42, Link: "3f2a", TreeSize: 42, Root: "9c1d", PublicKey: "ed25519:AAAA", Signature: "c2ln"},
	}
}

// TestReceivedWithoutAnswerStillDecodes reads a delivery.received.v1
// written before the optional answer existed.
func TestReceivedWithoutAnswerStillDecodes(t *testing.T) {
	old := `{"delivery_id":"d1","address":"k3","address_kind":"inspector","method":"GET","target":"/","host":"k3.localhost","proto":"HTTP/1.1","remote_addr":"127.0.0.1:1","headers":[],"body":"","body_size":0,"complete":true}`
	e, err := domain.NewCodec().Decode(domain.TypeDeliveryReceived, []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if r := e.(domain.DeliveryReceived); r.Answer != nil || r.DeliveryID != "d1" || !r.Complete {
		t.Fatalf("decoded %+v", r)
	}
}

// TestPlainHandshakeSecretsStillDecode reads an inspector.answer_set.v1
// written before secrets were kept as an HMAC or sealed: the plain values
// decode as they were, and the relay still answers with them.
func TestPlainHandshakeSecretsStillDecode(t *testing.T) {
	old := `{"inspector_id":"k3x9q2","answer":{"status":200,"headers":[{"name":"Content-Type","value":"text/plain"}],"body":"b2s="},"handshakes":{"enabled":["slack","zoom"],"meta_verify_token":"mvt","zoom_secret":"zs","in_proxy":"RELAY"}}`
	e, err := domain.NewCodec().Decode(domain.TypeInspectorAnswerSet, []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	h := e.(domain.InspectorAnswerSet).Handshakes
	if h == nil || h.MetaVerifyToken != "mvt" || h.ZoomSecret != "zs" || h.MetaVerifyTokenMAC != "" || h.ZoomSecretSealed != "" ||
		!h.MetaTokenSet() || !h.ZoomSecretSet() || !h.HasPlainSecret() {
		t.Fatalf("decoded %+v", h)
	}
}

// TestPlainPasswordHashesStillDecode reads member events written before
// password hashes were sealed: the plain hash decodes as it was and is
// what a sign-in is checked against, while ShownPayload leaves it out.
func TestPlainPasswordHashesStillDecode(t *testing.T) {
	const phc = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"
	codec := domain.NewCodec()
	for _, tc := range []struct {
		typ, old string
		stored   func(domain.Event) string
	}{
		{domain.TypeMemberJoined, `{"account_id":"acc-1","member_id":"mem-2","login":"Ada@example.com","role":"member","password_hash":"` + phc + `","by":"mem-1","invite_id":"minv-1"}`,
			func(e domain.Event) string { return e.(domain.MemberJoined).StoredPassword() }},
		{domain.TypeMemberPasswordChanged, `{"account_id":"acc-1","member_id":"mem-2","password_hash":"` + phc + `"}`,
			func(e domain.Event) string { return e.(domain.MemberPasswordChanged).StoredPassword() }},
	} {
		e, err := codec.Decode(tc.typ, []byte(tc.old))
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.stored(e); got != phc {
			t.Errorf("%s: stored password %q, want the plain hash", tc.typ, got)
		}
		shown := string(domain.ShownPayload(tc.typ, []byte(tc.old)))
		if strings.Contains(shown, "argon2id") || strings.Contains(shown, "password") || !strings.Contains(shown, `"member_id":"mem-2"`) {
			t.Errorf("%s shown as %s", tc.typ, shown)
		}
	}
}

// TestShownPayload: what people are shown of a payload (table).
func TestShownPayload(t *testing.T) {
	for _, tc := range []struct{ name, typ, data, want string }{
		{"a sealed hash is left out", domain.TypeMemberJoined,
			`{"account_id":"a","member_id":"m","login":"l","role":"owner","password_sealed":"aes256gcm:v1:k:AAAA"}`,
			`{"account_id":"a","login":"l","member_id":"m","role":"owner"}`},
		{"both forms are left out", domain.TypeMemberPasswordChanged,
			`{"account_id":"a","member_id":"m","password_hash":"$argon2id$x","password_sealed":"aes256gcm:v1:k:AAAA"}`,
			`{"account_id":"a","member_id":"m"}`},
		{"a payload without a password is kept byte for byte", domain.TypeMemberJoined,
			`{"member_id":"m",  "login":"l"}`, `{"member_id":"m",  "login":"l"}`},
		{"other types are kept byte for byte", domain.TypeTokenIssued,
			`{"password_hash":"not a member's"}`, `{"password_hash":"not a member's"}`},
		{"an unreadable member payload shows nothing", domain.TypeMemberPasswordChanged,
			`"$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA"`, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(domain.ShownPayload(tc.typ, []byte(tc.data))); got != tc.want {
				t.Fatalf("shown %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCodecGoldenFiles(t *testing.T) {
	codec := domain.NewCodec()
	at := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	covered := map[string]bool{}
	for _, e := range samples() {
		t.Run(e.EventType(), func(t *testing.T) {
			data, err := codec.Encode("00000000-0000-4000-8000-000000000001", e, at, domain.Trace{CorrelationID: "c", CausationID: "k"})
			if err != nil {
				t.Fatal(err)
			}
			if data.Type != e.EventType() || data.Metadata.SchemaVersion != 1 || !data.Metadata.OccurredAt.Equal(at) {
				t.Fatalf("envelope %+v", data)
			}
			golden := filepath.Join("testdata", e.EventType()+".json")
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
				t.Fatalf("JSON of %s changed:\n got %s\nwant %s", e.EventType(), data.Data, want)
			}
			back, err := codec.Decode(data.Type, want)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := codec.Encode("x", back, at, domain.Trace{})
			if !bytes.Equal(again.Data, data.Data) {
				t.Fatalf("round trip changed the payload: %s", again.Data)
			}
			covered[e.EventType()] = true
		})
	}
	types := codec.Types()
	sort.Strings(types)
	for _, typ := range types {
		if !covered[typ] {
			t.Errorf("no golden sample for %s", typ)
		}
	}
}

func TestCodecRejectsUnknownTypes(t *testing.T) {
	if _, err := domain.NewCodec().Decode("nope.v1", []byte("{}")); err == nil {
		t.Fatal("unknown type decoded")
	}
}

// TestRetainedCountAtLeast: a retention decision whose count stopped at
// its bound carries deliveries_at_least; one written before the bound,
// without it, decodes as an exact count.
func TestRetainedCountAtLeast(t *testing.T) {
	codec := domain.NewCodec()
	old := `{"endpoint_id":"e7","retention_ms":604800000,"cutoff":"2026-11-14T10:00:00Z","last_activity_at":"2026-11-21T09:59:00Z","deliveries":12}`
	e, err := codec.Decode(domain.TypeEndpointRetained, []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if r := e.(domain.EndpointRetained); r.Deliveries != 12 || r.DeliveriesAtLeast {
		t.Fatalf("decoded %+v, want an exact count of 12", r)
	}
	data, err := json.Marshal(domain.EndpointRetained{EndpointID: "e7", Deliveries: 1000, DeliveriesAtLeast: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"deliveries":1000,"deliveries_at_least":true`) {
		t.Fatalf("encoded %s", data)
	}
}
