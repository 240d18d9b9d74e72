package domain_test

import (
	"testing"

	"github.com/relayhq/relay/domain"
)

// TestParseStream: every stream name the domain makes parses back to its
// kind and id, and names it does not make are refused.
func TestParseStream(t *testing.T) {
	id := "0193a6c4-7b1e-7c3d-9f00-1a2b3c4d5e6f" // ids hold "-" themselves
	tests := []struct {
		name     string
		stream   string
		wantKind domain.StreamKind
		wantID   string
		wantOK   bool
	}{
		{"inspector", domain.InspectorStream(id), domain.StreamInspector, id, true},
		{"account", domain.AccountStream(id), domain.StreamAccount, id, true},
		{"endpoint", domain.EndpointStream(id), domain.StreamEndpoint, id, true},
		{"delivery", domain.DeliveryStream(id), domain.StreamDelivery, id, true},
		{"agent", domain.AgentStream(id), domain.StreamAgent, id, true},
		{"refusals", domain.RefusalsStream("abc"), domain.StreamRefusals, "abc", true},
		{"token uses", domain.TokenUseStream(id), domain.StreamTokenUse, id, true},
		{"empty", "", "", "", false},
		{"no separator", "delivery", "", "", false},
		{"empty id", domain.DeliveryStream(""), "", "", false},
		{"unknown kind", "order-1", "", "", false},
		{"kind in other case", "Delivery-1", "", "", false},
		{"leading separator", "-delivery-1", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, id, ok := domain.ParseStream(tt.stream)
			if kind != tt.wantKind || id != tt.wantID || ok != tt.wantOK {
				t.Errorf("ParseStream(%q) = %q, %q, %v; want %q, %q, %v", tt.stream, kind, id, ok, tt.wantKind, tt.wantID, tt.wantOK)
			}
		})
	}
}

// FuzzParseStream: whatever the name, a parsed stream is named back
// exactly by its kind's function, and a refused one yields nothing.
func FuzzParseStream(f *testing.F) {
	for _, s := range []string{"delivery-d1", "agent-e-1", "refusals-", "x-y", "-", "", "endpoint--"} {
		f.Add(s)
	}
	names := map[domain.StreamKind]func(string) string{
		domain.StreamInspector: domain.InspectorStream,
		domain.StreamAccount:   domain.AccountStream,
		domain.StreamEndpoint:  domain.EndpointStream,
		domain.StreamDelivery:  domain.DeliveryStream,
		domain.StreamAgent:     domain.AgentStream,
		domain.StreamRefusals:  domain.RefusalsStream,
		domain.StreamTokenUse:  domain.TokenUseStream,
	}
	f.Fuzz(func(t *testing.T, stream string) {
		kind, id, ok := domain.ParseStream(stream)
		if !ok {
			if kind != "" || id != "" {
				t.Fatalf("refused %q but returned %q, %q", stream, kind, id)
			}
			return
		}
		name, known := names[kind]
		if !known {
			t.Fatalf("%q parsed to unknown kind %q", stream, kind)
		}
		if id == "" {
			t.Fatalf("%q parsed to an empty id", stream)
		}
		if got := name(id); got != stream {
			t.Fatalf("%q parsed to %q, %q, which names %q", stream, kind, id, got)
		}
	})
}
