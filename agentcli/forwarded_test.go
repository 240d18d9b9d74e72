package agentcli

import (
	"net/http"
	"reflect"
	"testing"
	"time"
)

func TestAddForwardedHeaders(t *testing.T) {
	tests := []struct {
		name string
		sent http.Header
		o    origin
		want http.Header
	}{
		{
			name: "direct sender over https",
			sent: http.Header{"X-Sig": {"abc"}},
			o:    origin{Host: "ep1.relay.example.com", Scheme: "https", Sender: "203.0.113.9:50000"},
			want: http.Header{
				"X-Sig": {"abc"}, "X-Forwarded-Host": {"ep1.relay.example.com"}, "X-Forwarded-Proto": {"https"},
				"X-Forwarded-For": {"203.0.113.9"}, "Forwarded": {"for=203.0.113.9;host=ep1.relay.example.com;proto=https"},
			},
		},
		{
			name: "appended to what the sender sent, own host and proto replace the sender's",
			sent: http.Header{
				"X-Forwarded-For": {"10.0.0.1", "10.0.0.2"}, "Forwarded": {"for=10.0.0.1"},
				"X-Forwarded-Host": {"evil.example"}, "X-Forwarded-Proto": {"http"},
			},
			o: origin{Host: "ep1.localhost:8443", Scheme: "https", Sender: "[2001:db8::1]:443"},
			want: http.Header{
				"X-Forwarded-For": {"10.0.0.1, 10.0.0.2, 2001:db8::1"}, "X-Forwarded-Host": {"ep1.localhost:8443"}, "X-Forwarded-Proto": {"https"},
				"Forwarded": {`for=10.0.0.1, for="[2001:db8::1]";host="ep1.localhost:8443";proto=https`},
			},
		},
		{
			name: "a trusted proxy already named the sender",
			sent: http.Header{"X-Forwarded-For": {"198.51.100.7"}},
			o:    origin{Host: "ep1.relay.example.com", Scheme: "https", Sender: "198.51.100.7"},
			want: http.Header{
				"X-Forwarded-For": {"198.51.100.7"}, "X-Forwarded-Host": {"ep1.relay.example.com"}, "X-Forwarded-Proto": {"https"},
				"Forwarded": {"for=198.51.100.7;host=ep1.relay.example.com;proto=https"},
			},
		},
		{
			name: "a delivery recorded before the origin was kept",
			sent: http.Header{"X-Sig": {"abc"}},
			want: http.Header{"X-Sig": {"abc"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.sent.Clone()
			addForwardedHeaders(h, tt.o, new(fieldValues))
			if !reflect.DeepEqual(h, tt.want) {
				t.Errorf("headers =\n%v\nwant\n%v", h, tt.want)
			}
		})
	}
}

func TestHostHeader(t *testing.T) {
	req := localRequest{Method: "POST", Path: "/hook", Origin: origin{Host: "ep1.relay.example.com", Scheme: "https", Sender: "203.0.113.9:1"}}
	for _, tt := range []struct {
		preserve bool
		want     string
	}{{false, "127.0.0.1:3000"}, {true, "ep1.relay.example.com"}} {
		f := newForwarder(Target{Scheme: "http", Host: "127.0.0.1:3000"}, time.Second, false)
		f.preserveHost = tt.preserve
		hreq, err := f.newRequest(t.Context(), req, new(outgoing))
		if err != nil {
			t.Fatal(err)
		}
		if hreq.Host != tt.want || hreq.URL.Host != "127.0.0.1:3000" {
			t.Errorf("preserve=%v: Host %q, dialled %q; want Host %q and the target dialled", tt.preserve, hreq.Host, hreq.URL.Host, tt.want)
		}
	}
}
