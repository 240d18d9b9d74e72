package commands_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

var proxySettings = domain.EndpointSettings{Name: "hooks", Mode: domain.ModeProxy, Target: "127.0.0.1:3000"}

func TestCreateEndpoint(t *testing.T) {
	e := newEnv(t, defaultConfig())
	acc, _ := e.account(t, "Ada")
	var ids []string
	for _, set := range []domain.EndpointSettings{
		{Name: "log only", Mode: domain.ModeLog},
		{Name: "log with target", Mode: domain.ModeLog, Target: "localhost:8080"},
		{Name: "proxy", Mode: domain.ModeProxy, Target: "127.0.0.1:3000"},
		{Name: "proxy capturing", Mode: domain.ModeProxy, Target: "127.0.0.1:65535", ResponseCapture: true},
	} {
		t.Run(set.Name, func(t *testing.T) {
			ep := e.endpoint(t, acc.ID, set)
			if err := domain.ValidateAddressID(ep.ID); err != nil {
				t.Errorf("id %q: %v", ep.ID, err)
			}
			if !reflect.DeepEqual(settingsOf(ep), set) || ep.AccountID != acc.ID || ep.Deleted || ep.AgentCount != 0 {
				t.Errorf("endpoint %+v, want settings %+v of account %s", ep, set, acc.ID)
			}
			if back, err := e.views.Endpoint(ctx(t), ep.ID); err != nil || !reflect.DeepEqual(back, ep) {
				t.Errorf("views hold %+v (%v), CreateEndpoint returned %+v", back, err, ep)
			}
			ids = append(ids, ep.ID)
		})
	}
	list, err := e.views.Endpoints(ctx(t), acc.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, ep := range list {
		listed = append(listed, ep.ID)
	}
	if strings.Join(listed, ",") != strings.Join(ids, ",") {
		t.Errorf("account lists %v, want %v", listed, ids)
	}
}

func TestCreateEndpointRefusals(t *testing.T) {
	e := newEnv(t, defaultConfig())
	acc, _ := e.account(t, "Ada")
	for _, tc := range []struct {
		name  string
		set   domain.EndpointSettings
		field string
	}{
		{"empty name", domain.EndpointSettings{Name: " ", Mode: domain.ModeLog}, "name"},
		{"long name", domain.EndpointSettings{Name: strings.Repeat("n", 201), Mode: domain.ModeLog}, "name"},
		{"no mode", domain.EndpointSettings{Name: "x"}, "mode"},
		{"unknown mode", domain.EndpointSettings{Name: "x", Mode: "FORWARD"}, "mode"},
		{"proxy without target", domain.EndpointSettings{Name: "x", Mode: domain.ModeProxy}, "target"},
		{"remote host", domain.EndpointSettings{Name: "x", Mode: domain.ModeProxy, Target: "example.com:80"}, "target"},
		{"private address", domain.EndpointSettings{Name: "x", Mode: domain.ModeProxy, Target: "10.0.0.1:80"}, "target"},
		{"IPv6 loopback", domain.EndpointSettings{Name: "x", Mode: domain.ModeProxy, Target: "[::1]:80"}, "target"},
		{"URL", domain.EndpointSettings{Name: "x", Mode: domain.ModeProxy, Target: "http://127.0.0.1:80"}, "target"},
		{"no port", domain.EndpointSettings{Name: "x", Mode: domain.ModeProxy, Target: "127.0.0.1"}, "target"},
		{"port 0", domain.EndpointSettings{Name: "x", Mode: domain.ModeProxy, Target: "127.0.0.1:0"}, "target"},
		{"port too high", domain.EndpointSettings{Name: "x", Mode: domain.ModeProxy, Target: "127.0.0.1:65536"}, "target"},
		{"leading zero", domain.EndpointSettings{Name: "x", Mode: domain.ModeProxy, Target: "127.0.0.1:080"}, "target"},
		{"bad target in LOG mode", domain.EndpointSettings{Name: "x", Mode: domain.ModeLog, Target: "example.com:80"}, "target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.lastPosition(t)
			ep, err := e.svc.CreateEndpoint(ctx(t), acc.ID, "", tc.set)
			var inv *domain.InvalidInputError
			if !errors.As(err, &inv) || inv.Field != tc.field {
				t.Fatalf("CreateEndpoint = %+v, %v; want invalid %s", ep, err, tc.field)
			}
			e.appended(t, before, 0, "a refused Endpoint")
		})
	}
	t.Run("no account", func(t *testing.T) {
		before := e.lastPosition(t)
		if _, err := e.svc.CreateEndpoint(ctx(t), "", "", proxySettings); !errors.Is(err, domain.ErrUnauthenticated) {
			t.Fatalf("err = %v, want ErrUnauthenticated", err)
		}
		e.appended(t, before, 0, "a refused CreateEndpoint")
	})
}

func TestUpdateEndpointChanges(t *testing.T) {
	e := newEnv(t, defaultConfig())
	for _, tc := range []struct {
		name  string
		patch commands.EndpointPatch
		want  domain.EndpointSettings
	}{
		{"name", commands.EndpointPatch{Name: ptr("renamed")},
			domain.EndpointSettings{Name: "renamed", Mode: domain.ModeProxy, Target: "127.0.0.1:3000"}},
		{"mode", commands.EndpointPatch{Mode: ptr(domain.ModeLog)},
			domain.EndpointSettings{Name: "hooks", Mode: domain.ModeLog, Target: "127.0.0.1:3000"}},
		{"target", commands.EndpointPatch{Target: ptr("localhost:4000")},
			domain.EndpointSettings{Name: "hooks", Mode: domain.ModeProxy, Target: "localhost:4000"}},
		{"capture", commands.EndpointPatch{ResponseCapture: ptr(true)},
			domain.EndpointSettings{Name: "hooks", Mode: domain.ModeProxy, Target: "127.0.0.1:3000", ResponseCapture: true}},
		{"to LOG without target", commands.EndpointPatch{Mode: ptr(domain.ModeLog), Target: ptr("")},
			domain.EndpointSettings{Name: "hooks", Mode: domain.ModeLog}},
		{"everything", commands.EndpointPatch{Name: ptr("all"), Mode: ptr(domain.ModeLog), Target: ptr("localhost:1"), ResponseCapture: ptr(true)},
			domain.EndpointSettings{Name: "all", Mode: domain.ModeLog, Target: "localhost:1", ResponseCapture: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An account each: an account's Endpoint names are unique.
			acc, _ := e.account(t, "Ada")
			ep := e.endpoint(t, acc.ID, proxySettings)
			before := e.lastPosition(t)
			got, err := e.svc.UpdateEndpoint(ctx(t), acc.ID, "", ep.ID, tc.patch)
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if s := settingsOf(got); !reflect.DeepEqual(s, tc.want) || !reflect.DeepEqual(got.ID, ep.ID) || !reflect.DeepEqual(got.AccountID, acc.ID) {
				t.Errorf("UpdateEndpoint returned %+v, want settings %+v", got, tc.want)
			}
			if back, err := e.views.Endpoint(ctx(t), ep.ID); err != nil || !reflect.DeepEqual(back, got) {
				t.Errorf("views hold %+v (%v), UpdateEndpoint returned %+v", back, err, got)
			}
			e.appended(t, before, 1, "the update")
			_, events := e.stream(t, domain.EndpointStream(ep.ID))
			want := domain.EndpointReconfigured{EndpointID: ep.ID, Name: tc.want.Name, Mode: tc.want.Mode, Target: tc.want.Target, ResponseCapture: tc.want.ResponseCapture}
			if len(events) != 2 || !reflect.DeepEqual(events[1], want) {
				t.Errorf("stream holds %+v, want EndpointCreated then %+v", events, want)
			}
		})
	}
}

func TestUpdateEndpointWithoutChangeAppendsNothing(t *testing.T) {
	e := newEnv(t, defaultConfig())
	acc, _ := e.account(t, "Ada")
	ep := e.endpoint(t, acc.ID, proxySettings)
	for _, tc := range []struct {
		name  string
		patch commands.EndpointPatch
	}{
		{"empty patch", commands.EndpointPatch{}},
		{"same name", commands.EndpointPatch{Name: ptr("hooks")}},
		{"same mode", commands.EndpointPatch{Mode: ptr(domain.ModeProxy)}},
		{"same target", commands.EndpointPatch{Target: ptr("127.0.0.1:3000")}},
		{"same capture", commands.EndpointPatch{ResponseCapture: ptr(false)}},
		{"all the same", commands.EndpointPatch{Name: ptr("hooks"), Mode: ptr(domain.ModeProxy), Target: ptr("127.0.0.1:3000"), ResponseCapture: ptr(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.lastPosition(t)
			got, err := e.svc.UpdateEndpoint(ctx(t), acc.ID, "", ep.ID, tc.patch)
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if !reflect.DeepEqual(got, ep) {
				t.Errorf("UpdateEndpoint returned %+v, want the unchanged %+v", got, ep)
			}
			e.appended(t, before, 0, "a no-op update")
		})
	}
}

func TestUpdateEndpointRefusesInvalidSettings(t *testing.T) {
	e := newEnv(t, defaultConfig())
	acc, _ := e.account(t, "Ada")
	ep := e.endpoint(t, acc.ID, proxySettings)
	for _, tc := range []struct {
		name  string
		patch commands.EndpointPatch
		field string
	}{
		{"empty name", commands.EndpointPatch{Name: ptr("")}, "name"},
		{"unknown mode", commands.EndpointPatch{Mode: ptr(domain.EndpointMode("proxy"))}, "mode"},
		{"remote target", commands.EndpointPatch{Target: ptr("example.com:3000")}, "target"},
		{"bad port", commands.EndpointPatch{Target: ptr("127.0.0.1:http")}, "target"},
		{"proxy loses its target", commands.EndpointPatch{Target: ptr("")}, "target"},
		{"valid name, bad target", commands.EndpointPatch{Name: ptr("fine"), Target: ptr("10.1.1.1:80")}, "target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.lastPosition(t)
			got, err := e.svc.UpdateEndpoint(ctx(t), acc.ID, "", ep.ID, tc.patch)
			var inv *domain.InvalidInputError
			if !errors.As(err, &inv) || inv.Field != tc.field {
				t.Fatalf("UpdateEndpoint = %+v, %v; want invalid %s", got, err, tc.field)
			}
			e.appended(t, before, 0, "a refused update")
			if back, err := e.views.Endpoint(ctx(t), ep.ID); err != nil || !reflect.DeepEqual(back, ep) {
				t.Errorf("views hold %+v (%v), want the unchanged %+v", back, err, ep)
			}
		})
	}
}

// TestEndpointOfAnotherAccountIsNotFound: another account's Endpoint, a
// deleted one, a malformed id and an unknown one give the same error.
func TestEndpointOfAnotherAccountIsNotFound(t *testing.T) {
	e := newEnv(t, defaultConfig())
	ada, _ := e.account(t, "Ada")
	bob, _ := e.account(t, "Bob")
	bobs := e.endpoint(t, bob.ID, proxySettings)
	deleted := e.endpoint(t, ada.ID, proxySettings)
	if err := e.svc.DeleteEndpoint(ctx(t), ada.ID, "", deleted.ID); err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name string
		run  func(id string) error
	}{
		{"update", func(id string) error {
			_, err := e.svc.UpdateEndpoint(ctx(t), ada.ID, "", id, commands.EndpointPatch{Name: ptr("taken over")})
			return err
		}},
		{"no-op update", func(id string) error {
			_, err := e.svc.UpdateEndpoint(ctx(t), ada.ID, "", id, commands.EndpointPatch{})
			return err
		}},
		{"delete", func(id string) error { return e.svc.DeleteEndpoint(ctx(t), ada.ID, "", id) }},
	}
	for _, op := range ops {
		unknownErr := op.run(commands.NewAddressID())
		if !errors.Is(unknownErr, domain.ErrNotFound) {
			t.Fatalf("%s of an unknown id: %v, want ErrNotFound", op.name, unknownErr)
		}
		for _, tc := range []struct{ name, id string }{
			{"another account's", bobs.ID},
			{"deleted", deleted.ID},
			{"malformed", "Not.An-Id"},
			{"empty", ""},
		} {
			t.Run(op.name+" "+tc.name, func(t *testing.T) {
				before := e.lastPosition(t)
				err := op.run(tc.id)
				if !errors.Is(err, domain.ErrNotFound) || err.Error() != unknownErr.Error() {
					t.Errorf("err = %v; want the unknown id's %v", err, unknownErr)
				}
				e.appended(t, before, 0, "a refused command")
			})
		}
	}
	if back, err := e.views.Endpoint(ctx(t), bobs.ID); err != nil || !reflect.DeepEqual(back, bobs) {
		t.Errorf("Bob's Endpoint is now %+v (%v), want %+v", back, err, bobs)
	}
}

func TestDeleteEndpoint(t *testing.T) {
	e := newEnv(t, defaultConfig())
	acc, _ := e.account(t, "Ada")
	kept := e.endpoint(t, acc.ID, named(proxySettings, "kept"))
	ep := e.endpoint(t, acc.ID, proxySettings)

	before := e.lastPosition(t)
	if err := e.svc.DeleteEndpoint(ctx(t), acc.ID, "", ep.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	e.appended(t, before, 1, "delete")
	// Read-your-writes: gone from the views as soon as Delete returns.
	if got, err := e.views.Endpoint(ctx(t), ep.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("deleted Endpoint reads %+v, %v; want ErrNotFound", got, err)
	}
	list, err := e.views.Endpoints(ctx(t), acc.ID, "", 0)
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0], kept) {
		t.Errorf("account lists %+v (%v), want only %s", list, err, kept.ID)
	}
	_, events := e.stream(t, domain.EndpointStream(ep.ID))
	if len(events) != 2 || events[1] != (domain.EndpointDeleted{EndpointID: ep.ID}) {
		t.Errorf("stream holds %+v, want EndpointCreated, EndpointDeleted", events)
	}

	before = e.lastPosition(t)
	if _, err := e.svc.UpdateEndpoint(ctx(t), acc.ID, "", ep.ID, commands.EndpointPatch{Name: ptr("back")}); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("update after delete: %v, want ErrNotFound", err)
	}
	if err := e.svc.DeleteEndpoint(ctx(t), acc.ID, "", ep.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	e.appended(t, before, 0, "refused commands")
}

func settingsOf(ep readmodel.Endpoint) domain.EndpointSettings {
	return domain.EndpointSettings{Name: ep.Name, Mode: ep.Mode, Target: ep.Target, ResponseCapture: ep.ResponseCapture}
}

// TestConcurrentUpdatesAllApply updates one Endpoint from several goroutines
// at once. Each update reads the stream, decides and appends; when another
// update appended in between, the append is refused and the update must
// decide again on the newer state instead of failing. Every update then
// lands as one event.
func TestConcurrentUpdatesAllApply(t *testing.T) {
	e := newEnv(t, defaultConfig())
	acc, _ := e.account(t, "Ada")
	ep := e.endpoint(t, acc.ID, proxySettings)
	const writers, each = 4, 5
	errs := make(chan error, writers*each)
	for w := range writers {
		go func() {
			for i := range each {
				name := fmt.Sprintf("writer %d update %d", w, i)
				_, err := e.svc.UpdateEndpoint(ctx(t), acc.ID, "", ep.ID, commands.EndpointPatch{Name: &name})
				errs <- err
			}
		}()
	}
	for range writers * each {
		if err := <-errs; err != nil {
			t.Errorf("concurrent update: %v", err)
		}
	}
	_, events := e.stream(t, domain.EndpointStream(ep.ID))
	if got := len(events) - 1; got != writers*each {
		t.Errorf("%d EndpointReconfigured events, want %d", got, writers*each)
	}
}

// TestEndpointNamesAreUniquePerAccount: a name an undeleted Endpoint of
// the account holds is refused on create and on rename (INVALID_INPUT on
// "name", naming the holder's id), and appends nothing; another account,
// a deleted Endpoint's name and an Endpoint keeping its own name pass.
func TestEndpointNamesAreUniquePerAccount(t *testing.T) {
	e := newEnv(t, defaultConfig())
	acc, _ := e.account(t, "Ada")
	other, _ := e.account(t, "Bob")
	orders := e.endpoint(t, acc.ID, domain.EndpointSettings{Name: "orders", Mode: domain.ModeLog})
	gone := e.endpoint(t, acc.ID, domain.EndpointSettings{Name: "gone", Mode: domain.ModeLog})
	if err := e.svc.DeleteEndpoint(ctx(t), acc.ID, "", gone.ID); err != nil {
		t.Fatal(err)
	}
	spare := e.endpoint(t, acc.ID, domain.EndpointSettings{Name: "spare", Mode: domain.ModeLog})
	for _, tc := range []struct {
		name    string
		do      func() error
		refused bool
	}{
		{"create a name in use", func() error {
			_, err := e.svc.CreateEndpoint(ctx(t), acc.ID, "", domain.EndpointSettings{Name: "orders", Mode: domain.ModeLog})
			return err
		}, true},
		{"rename to a name in use", func() error {
			_, err := e.svc.UpdateEndpoint(ctx(t), acc.ID, "", spare.ID, commands.EndpointPatch{Name: ptr("orders")})
			return err
		}, true},
		{"keep its own name", func() error {
			_, err := e.svc.UpdateEndpoint(ctx(t), acc.ID, "", orders.ID, commands.EndpointPatch{Name: ptr("orders"), Mode: ptr(domain.ModeLog)})
			return err
		}, false},
		{"another account's name", func() error {
			_, err := e.svc.CreateEndpoint(ctx(t), other.ID, "", domain.EndpointSettings{Name: "orders", Mode: domain.ModeLog})
			return err
		}, false},
		{"a deleted Endpoint's name", func() error {
			_, err := e.svc.CreateEndpoint(ctx(t), acc.ID, "", domain.EndpointSettings{Name: "gone", Mode: domain.ModeLog})
			return err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.lastPosition(t)
			err := tc.do()
			if !tc.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var inv *domain.InvalidInputError
			want := fmt.Sprintf("an Endpoint named %q exists (id %s)", "orders", orders.ID)
			if !errors.As(err, &inv) || inv.Field != "name" || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want INVALID_INPUT on name saying %q", err, want)
			}
			e.appended(t, before, 0, tc.name)
		})
	}
	list, err := e.views.Endpoints(ctx(t), acc.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list); n != 3 {
		t.Errorf("account has %d Endpoints, want 3 (orders, spare, gone again)", n)
	}
}
