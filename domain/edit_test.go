package domain_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
)

func bytesPtr(s string) *[]byte { b := []byte(s); return &b }

// TestRequestEditApply: an edit changes exactly what it sets; headers keep
// their order, a set name replaces all its values in the first one's place,
// and Content-Length follows a new body.
func TestRequestEditApply(t *testing.T) {
	rec := []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Sig", Value: "a"},
		{Name: "Content-Length", Value: "2"}, {Name: "x-sig", Value: "b"}, {Name: "X-Old", Value: "1"}}
	for _, tt := range []struct {
		name        string
		edit        domain.RequestEdit
		method, tgt string
		headers     []domain.Header
		body        string
	}{
		{"nothing", domain.RequestEdit{}, "POST", "/a?x=1", rec, "{}"},
		{"method and path", domain.RequestEdit{Method: "PUT", Target: "/b"}, "PUT", "/b", rec, "{}"},
		{"set replaces every value in place", domain.RequestEdit{SetHeaders: []domain.Header{{Name: "X-SIG", Value: "new"}}}, "POST", "/a?x=1",
			[]domain.Header{rec[0], {Name: "X-SIG", Value: "new"}, rec[2], rec[4]}, "{}"},
		{"set adds a new name last, unset removes", domain.RequestEdit{SetHeaders: []domain.Header{{Name: "X-New", Value: "1"}, {Name: "X-New", Value: "2"}}, UnsetHeaders: []string{"x-old"}},
			"POST", "/a?x=1", []domain.Header{rec[0], rec[1], rec[2], rec[3], {Name: "X-New", Value: "1"}, {Name: "X-New", Value: "2"}}, "{}"},
		{"body and its length", domain.RequestEdit{Body: bytesPtr(`{"edited":true}`)}, "POST", "/a?x=1",
			[]domain.Header{rec[0], rec[1], {Name: "Content-Length", Value: "15"}, rec[3], rec[4]}, `{"edited":true}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]domain.Header(nil), rec...)
			m, tg, hs, b := tt.edit.Apply("POST", "/a?x=1", in, []byte("{}"))
			if m != tt.method || tg != tt.tgt || string(b) != tt.body || !reflect.DeepEqual(hs, tt.headers) {
				t.Fatalf("got %s %s %v %q\nwant %s %s %v %q", m, tg, hs, b, tt.method, tt.tgt, tt.headers, tt.body)
			}
			if !reflect.DeepEqual(in, rec) {
				t.Fatal("the recorded headers were changed")
			}
		})
	}
}

// TestRequestEditCheck: each bad edit is refused naming its field.
func TestRequestEditCheck(t *testing.T) {
	for _, tt := range []struct {
		edit  domain.RequestEdit
		field string
	}{
		{domain.RequestEdit{Method: "PO ST"}, "edit.method"},
		{domain.RequestEdit{Target: "no-slash"}, "edit.path"},
		{domain.RequestEdit{Target: "/a b"}, "edit.path"},
		{domain.RequestEdit{SetHeaders: []domain.Header{{Name: "Bad Name", Value: "x"}}}, "edit.setHeaders"},
		{domain.RequestEdit{SetHeaders: []domain.Header{{Name: "X", Value: "a\r\nInjected: 1"}}}, "edit.setHeaders"},
		{domain.RequestEdit{SetHeaders: []domain.Header{{Name: "Content-Length", Value: "5"}}}, "edit.setHeaders"},
		{domain.RequestEdit{UnsetHeaders: []string{"a:b"}}, "edit.unsetHeaders"},
		{domain.RequestEdit{Body: bytesPtr("12345")}, "edit.body"},
		{domain.RequestEdit{SetHeaders: []domain.Header{{Name: "X-A", Value: strings.Repeat("a", 40<<10)}, {Name: "X-B", Value: strings.Repeat("b", 30<<10)}}}, "edit.setHeaders"},
	} {
		err := tt.edit.Check(4)
		var bad *domain.InvalidInputError
		if !errors.As(err, &bad) || bad.Field != tt.field {
			t.Errorf("%+v: %v, want invalid %s", tt.edit, err, tt.field)
		}
	}
	if err := (domain.RequestEdit{Method: "PATCH", Target: "/x?y=1", Body: bytesPtr("1234"), UnsetHeaders: []string{"X-Sig"}}).Check(4); err != nil {
		t.Errorf("a good edit: %v", err)
	}
}
