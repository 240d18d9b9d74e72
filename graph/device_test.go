package graph_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
)

type deviceCode struct {
	DeviceCode, UserCode, VerificationPath string
	ExpiresIn, Interval                    int
}

func (e *env) requestDevice(t *testing.T, name string) deviceCode {
	t.Helper()
	var out struct{ RequestDeviceCode deviceCode }
	e.c.MustPost(`mutation($n: String!) { requestDeviceCode(clientName: $n) { deviceCode userCode verificationPath expiresIn interval } }`,
		&out, client.Var("n", name))
	return out.RequestDeviceCode
}

func (e *env) poll(deviceCode string) (string, error) {
	var out struct{ PollDeviceCode struct{ Token string } }
	err := e.c.Post(`mutation($c: String!) { pollDeviceCode(deviceCode: $c) { token } }`, &out, client.Var("c", deviceCode))
	return out.PollDeviceCode.Token, err
}

func extCode(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	for _, c := range []string{"AUTHORIZATION_PENDING", "SLOW_DOWN", "EXPIRED_TOKEN", "ACCESS_DENIED", "INVALID_INPUT", "UNAUTHENTICATED", "RATE_LIMITED"} {
		if strings.Contains(s, `"code":"`+c+`"`) {
			return c
		}
	}
	return s
}

// TestDeviceLogin walks RFC 8628 through the API: pending, slow_down,
// approval by a signed-in account, the token named after the device, a
// code used once, denial, and expiry.
func TestDeviceLogin(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC).UnixNano())
	tick := func(d time.Duration) { clock.Add(int64(d)) }
	e := newEnvClock(t, func() time.Time { return time.Unix(0, clock.Load()) })
	ada := e.signUp(t, "ada")

	dc := e.requestDevice(t, "ada-laptop")
	if dc.VerificationPath != "/device" || dc.Interval != 5 || dc.ExpiresIn < 590 || dc.ExpiresIn > 600 ||
		len(dc.UserCode) != 9 || dc.UserCode[4] != '-' || !strings.HasPrefix(dc.DeviceCode, "rdc_") {
		t.Fatalf("device code %+v", dc)
	}
	if _, err := e.poll(dc.DeviceCode); extCode(err) != "AUTHORIZATION_PENDING" {
		t.Fatalf("first poll: %v", err)
	}
	if _, err := e.poll(dc.DeviceCode); extCode(err) != "SLOW_DOWN" {
		t.Fatalf("a poll at once: %v, want SLOW_DOWN", err)
	}
	tick(5 * time.Second)

	var seen struct {
		DeviceAuthorization struct{ ClientName, Status string }
	}
	lower := strings.ToLower(strings.ReplaceAll(dc.UserCode, "-", " "))
	e.c.MustPost(`query($c: String!) { deviceAuthorization(userCode: $c) { clientName status } }`, &seen, client.Var("c", lower), bearerOpt(ada))
	if seen.DeviceAuthorization.ClientName != "ada-laptop" || seen.DeviceAuthorization.Status != "pending" {
		t.Fatalf("deviceAuthorization = %+v", seen.DeviceAuthorization)
	}
	if err := e.c.Post(`mutation($c: String!) { approveDevice(userCode: $c) { status } }`, &struct{}{}, client.Var("c", dc.UserCode)); extCode(err) != "UNAUTHENTICATED" {
		t.Fatalf("approval without a token: %v", err)
	}
	var approved struct{ ApproveDevice struct{ Status string } }
	e.c.MustPost(`mutation($c: String!) { approveDevice(userCode: $c) { status } }`, &approved, client.Var("c", dc.UserCode), bearerOpt(ada))
	if approved.ApproveDevice.Status != "approved" {
		t.Fatalf("approved: %+v", approved)
	}
	token, err := e.poll(dc.DeviceCode)
	if err != nil || !strings.HasPrefix(token, "rly_") {
		t.Fatalf("poll after approval: %q, %v", token, err)
	}
	list := e.tokens(t, token)
	if len(list) != 2 || list[1].Name != "ada-laptop" || !list[1].Current {
		t.Fatalf("the device's token: %+v", list)
	}
	// Single use: neither the device nor the console can use the code again.
	tick(5 * time.Second)
	if _, err := e.poll(dc.DeviceCode); extCode(err) != "EXPIRED_TOKEN" {
		t.Fatalf("a second redemption: %v, want EXPIRED_TOKEN", err)
	}
	err = e.c.Post(`mutation($c: String!) { approveDevice(userCode: $c) { status } }`, &struct{}{}, client.Var("c", dc.UserCode), bearerOpt(ada))
	if extCode(err) != "INVALID_INPUT" || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("approving a used code: %v", err)
	}

	// Denied.
	denied := e.requestDevice(t, "stranger")
	e.c.MustPost(`mutation($c: String!) { denyDevice(userCode: $c) { status } }`, &struct{ DenyDevice struct{ Status string } }{}, client.Var("c", denied.UserCode), bearerOpt(ada))
	if _, err := e.poll(denied.DeviceCode); extCode(err) != "ACCESS_DENIED" {
		t.Fatalf("poll after denial: %v", err)
	}

	// Expired: neither approval nor poll passes.
	late := e.requestDevice(t, "late")
	tick(10 * time.Minute)
	err = e.c.Post(`mutation($c: String!) { approveDevice(userCode: $c) { status } }`, &struct{}{}, client.Var("c", late.UserCode), bearerOpt(ada))
	if extCode(err) != "INVALID_INPUT" || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("approving an expired code: %v", err)
	}
	if _, err := e.poll(late.DeviceCode); extCode(err) != "EXPIRED_TOKEN" {
		t.Fatalf("polling an expired code: %v", err)
	}

	// Bad input names its field.
	for _, bad := range []string{"", "ABCD-EFGH", "BCDF-GHJ"} {
		err := e.c.Post(`mutation($c: String!) { approveDevice(userCode: $c) { status } }`, &struct{}{}, client.Var("c", bad), bearerOpt(ada))
		if extCode(err) != "INVALID_INPUT" || !strings.Contains(err.Error(), `"field":"userCode"`) {
			t.Errorf("approveDevice(%q): %v", bad, err)
		}
	}
	if _, err := e.poll("rdc_nope"); extCode(err) != "INVALID_INPUT" || !strings.Contains(err.Error(), `"field":"deviceCode"`) {
		t.Errorf("an unknown device code: %v", err)
	}
	if err := e.c.Post(`mutation { requestDeviceCode(clientName: " ") { userCode } }`, &struct{}{}); extCode(err) != "INVALID_INPUT" {
		t.Errorf("a blank client name: %v", err)
	}
}

// TestDeviceApprovalsAreLimited: an account may try only so many user
// codes a minute, so codes cannot be guessed by trying.
func TestDeviceApprovalsAreLimited(t *testing.T) {
	e := newEnv(t)
	ada := e.signUp(t, "ada")
	limited := false
	for i := 0; i < 30 && !limited; i++ {
		err := e.c.Post(`mutation { approveDevice(userCode: "BCDF-GHJK") { status } }`, &struct{}{}, bearerOpt(ada))
		switch extCode(err) {
		case "INVALID_INPUT":
		case "RATE_LIMITED":
			limited = i >= 10
			if !limited {
				t.Fatalf("limited after %d attempts, want 10 let through", i)
			}
		default:
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	if !limited {
		t.Fatal("30 wrong codes in a row were never limited")
	}
}
