// Package login is `relay login` and `relay logout`, and the first login
// listen runs for a new user (firstlogin.go).
package login

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/cli/tokens"
	"github.com/relayhq/relay/clientconfig"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/termtext"
)

// Command is `relay login`.
func Command(env func(string) string, stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var signup, invite string
	var force, device bool
	cmd := &cobra.Command{
		Use: "login --server URL [--token T | --token - | --signup NAME | --device]",
		// Sign-up is login --signup; ngrok's authtoken, gh's auth.
		SuggestFor: []string{"signup", "register", "signin", "auth", "authtoken"},
		Short:      "Log in to a relay: store its URL and your token for later commands",
		Example: `  relay login --server https://relay.example.com          # approve in the browser
  relay login --server http://localhost:8080 --signup me
  relay login --server https://relay.example.com --token rly_...
  pass show relay-token | relay login --server https://relay.example.com`,
		Long: `Check a token against a relay and store the relay's URL and the token in
the user's config folder (relay/config.json, readable by its owner only).
Later commands use them unless --server/--token or RELAY_SERVER/RELAY_TOKEN
say otherwise.

The token comes from --token, from RELAY_TOKEN, or from standard input when
it is not a terminal (or with --token -); --signup NAME creates an account
instead, on a relay that allows sign-up. With none of these (or with
--device), the relay gives a short code to approve in its console at
/device, where you are signed in: once approved, this machine receives a
token of its own, named after its hostname (relay tokens list shows it;
relay tokens revoke ID stops it).`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			fs := c.Flags()
			tokenFlag := fs.Changed("token")
			if err := cmdutil.BindEnv(fs, env); err != nil {
				return cmdutil.Usage(err)
			}
			if err := conn.LoadTLS(); err != nil {
				return err
			}
			stored, path, err := clientconfig.Load()
			if err != nil {
				return err
			}
			if !fs.Changed("server") && stored.Server != "" {
				conn.Server = stored.Server
			}
			if conn.Server, err = cmdutil.NormalServer(conn.Server); err != nil {
				return err
			}
			ctx := c.Context()
			var account string
			switch {
			case invite != "" && signup == "":
				return cmdutil.Usage(errors.New("--invite goes with --signup NAME: an invite creates an account"))
			case signup != "" && tokenFlag:
				return cmdutil.Usage(errors.New("--signup creates a new token: give --token or --signup, not both"))
			case device && (signup != "" || tokenFlag):
				return cmdutil.Usage(errors.New("--device asks the console for a new token: give --device, --token or --signup, not several"))
			case device || (signup == "" && conn.Token == "" && cmdutil.CanAsk(stdin)):
				// The console may approve for another account than the
				// stored login's: refused up front, as --signup is.
				if err := keepStoredLogin(ctx, conn, stored, force, "a login approved in the console (perhaps for another account)"); err != nil {
					return err
				}
				if conn.Token, err = deviceLogin(ctx, conn.Client(""), conn.Server, stderr); err != nil {
					return fmt.Errorf("log in to %s: %w", conn.Server, err)
				}
			case signup != "":
				if err := keepStoredLogin(ctx, conn, stored, force, "a new account"); err != nil {
					return err
				}
				if conn.Token, account, err = signUp(ctx, conn.Client(""), signup, invite); err != nil {
					return fmt.Errorf("sign up at %s: %w", conn.Server, err)
				}
			default:
				if conn.Token == "-" || (conn.Token == "" && !cmdutil.CanAsk(stdin)) {
					if conn.Token, err = readToken(stdin); err != nil {
						return err
					}
				}
				if conn.Token == "" {
					return cmdutil.Usage(errors.New("no token: pass --token T, set RELAY_TOKEN, pipe it on standard input, or use --signup NAME"))
				}
			}
			n, me, err := CheckToken(ctx, conn.Client(conn.Token))
			if err != nil {
				return fmt.Errorf("login to %s: %w", conn.Server, err)
			}
			if account == "" {
				account = fmt.Sprintf("%s (%s)", me.Name, me.ID)
			}
			if err := clientconfig.Save(path, clientconfig.Config{Server: conn.Server, Token: conn.Token}); err != nil {
				return err
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, loginJSON{Server: conn.Server, Account: me, Endpoints: n, Config: path})
			}
			fmt.Fprintf(stdout, "logged in to %s as %s (%s); token stored in %s\n", conn.Server, account, domain.Counted(n, "endpoint", "endpoints"), path)
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	cmd.Flags().StringVar(&signup, "signup", "", "create an account with this name and log in with its new token")
	cmd.Flags().BoolVar(&force, "force", false, "with --signup or --device: replace a stored login for the same relay (its token is lost to this machine)")
	cmd.Flags().StringVar(&invite, "invite", "", "with --signup: the invite code on a relay whose sign-up is by invite")
	cmd.Flags().BoolVar(&device, "device", false, "approve this machine in the relay's console (the default when no token is given and standard input is a terminal)")
	return cmd
}

// keepStoredLogin refuses a sign-up that would overwrite the token stored
// for the same relay: the relay shows a token once, so the Endpoints of
// that account (and the provider settings that point at them) would be
// lost to this machine. A stored token the relay no longer accepts is
// not worth keeping.
func keepStoredLogin(ctx context.Context, conn cmdutil.Connection, stored clientconfig.Config, force bool, what string) error {
	if force || stored.Token == "" || strings.TrimRight(stored.Server, "/") != strings.TrimRight(conn.Server, "/") {
		return nil
	}
	n, me, err := CheckToken(ctx, conn.Client(stored.Token))
	var apiErr *apiclient.Error
	if errors.As(err, &apiErr) && apiErr.Code == "UNAUTHENTICATED" {
		return nil
	}
	who := "an account"
	if err == nil {
		who = fmt.Sprintf("%s (%s, %s)", me.Name, me.ID, domain.Counted(n, "endpoint", "endpoints"))
	}
	return cmdutil.Usage(fmt.Errorf("already logged in to %s as %s: %s would replace that login, and the relay cannot show its token again. "+
		"Keep it and use its Endpoints, or run `relay logout` first, or pass --force to replace it", conn.Server, who, what))
}

// LogoutCommand is `relay logout`.
func LogoutCommand(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var local bool
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "Revoke the token `relay login` stored, and forget it",
		Example: `  relay logout
  relay logout --local   # forget it only, when the relay cannot be reached`,
		Long: `Revoke the stored token on the relay (it stops working at once, everywhere),
then remove it from the config file. A relay that no longer accepts the
token needs no revocation. When the relay cannot be reached, nothing is
removed (the token would stay valid on the relay): try again, or pass
--local to forget it anyway, and revoke it later from another login
(relay tokens revoke ID).`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := conn.LoadTLS(); err != nil {
				return err
			}
			stored, path, err := clientconfig.Load()
			if err != nil {
				return err
			}
			if stored.Token == "" {
				fmt.Fprintln(stdout, "not logged in")
				return nil
			}
			var revoked string
			if !local {
				conn.Server = stored.Server
				name, err := tokens.RevokeCurrent(c.Context(), conn.Client(stored.Token))
				var apiErr *apiclient.Error
				switch {
				case errors.As(err, &apiErr) && apiErr.Code == "UNAUTHENTICATED":
					revoked = "the relay no longer accepted the token"
				case err != nil:
					return fmt.Errorf("log out of %s: %w (the token stays stored and valid; try again, or pass --local to forget it without revoking)", stored.Server, err)
				default:
					revoked = fmt.Sprintf("token %q revoked on the relay", name)
				}
			} else {
				revoked = "token NOT revoked on the relay (--local): revoke it with `relay tokens revoke ID` from another login"
				fmt.Fprintln(stderr, "warning: "+revoked)
			}
			// The server stays: the next `relay login` needs only a token.
			if err := clientconfig.Save(path, clientconfig.Config{Server: stored.Server}); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "logged out of %s; %s; removed from %s\n", stored.Server, revoked, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&conn.CAFile, "ca-file", "", agentcli.CAFileUsage)
	cmd.Flags().BoolVar(&local, "local", false, "only forget the stored token, without revoking it on the relay")
	return cmd
}

// deviceLogin asks the relay for a device code, tells the user where to
// approve it, and polls until the relay gives this machine its token
// (RFC 8628).
func deviceLogin(ctx context.Context, client *apiclient.Client, server string, stderr io.Writer) (string, error) {
	name, err := os.Hostname()
	if err != nil || strings.TrimSpace(name) == "" {
		name = "relay CLI"
	}
	if len(name) > 100 {
		name = name[:100]
	}
	var code struct {
		RequestDeviceCode struct {
			DeviceCode, UserCode, VerificationPath string
			VerificationURL                        *string `json:"verificationUrl"`
			ExpiresIn, Interval                    int
		}
	}
	const q = `mutation($n: String!){ requestDeviceCode(clientName: $n){ deviceCode userCode verificationPath verificationUrl expiresIn interval } }`
	if err := client.Do(ctx, q, map[string]any{"n": name}, &code); err != nil {
		return "", fmt.Errorf("ask for a device code: %w", err)
	}
	dc := code.RequestDeviceCode
	// The code and the page are the server's text, printed on the user's
	// terminal: no escape sequences get through.
	dc.UserCode = termtext.Safe(dc.UserCode, false)
	page := termtext.Safe(cmdutil.ConsolePage(server, dc.VerificationPath, dc.VerificationURL), false)
	fmt.Fprintf(stderr, "To log in, open %s?code=%s in a browser where you are signed in to the relay,\n", page, url.QueryEscape(dc.UserCode))
	fmt.Fprintf(stderr, "check that it shows the code %s, and approve it (this machine: %s).\n", dc.UserCode, name)
	fmt.Fprintf(stderr, "Waiting for approval (the code expires in %s; Ctrl-C to stop)...\n", domain.Counted(max(1, dc.ExpiresIn/60), "minute", "minutes"))
	interval := time.Duration(max(dc.Interval, 1)) * time.Second
	deadline := time.Now().Add(time.Duration(dc.ExpiresIn)*time.Second + interval)
	for {
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
		var res struct{ PollDeviceCode struct{ Token string } }
		err := client.Do(ctx, `mutation($c: String!){ pollDeviceCode(deviceCode: $c){ token } }`, map[string]any{"c": dc.DeviceCode}, &res)
		var apiErr *apiclient.Error
		switch {
		case err == nil:
			return res.PollDeviceCode.Token, nil
		case errors.As(err, &apiErr) && apiErr.Code == "AUTHORIZATION_PENDING":
		case errors.As(err, &apiErr) && apiErr.Code == "SLOW_DOWN":
			interval += 5 * time.Second // RFC 8628 §3.5
		case errors.As(err, &apiErr) && apiErr.Code == "ACCESS_DENIED":
			return "", &apiclient.Error{Code: apiErr.Code, Message: "the code " + dc.UserCode + " was denied in the console; nothing was stored"}
		case errors.As(err, &apiErr) && apiErr.Code == "EXPIRED_TOKEN":
			return "", &apiclient.Error{Code: apiErr.Code, Message: "the code " + dc.UserCode + " expired before it was approved (or was already used): run `relay login` again for a new one"}
		case errors.As(err, &apiErr) && !apiErr.Refusal():
			// Unavailable or rate limited: the next poll may pass.
		default:
			return "", fmt.Errorf("wait for approval: %w", err)
		}
		if time.Now().After(deadline) {
			return "", &apiclient.Error{Code: "EXPIRED_TOKEN", Message: "the code " + dc.UserCode + " expired before it was approved: run `relay login` again for a new one"}
		}
	}
}

// signUp creates an account and returns its token and a description.
func signUp(ctx context.Context, client *apiclient.Client, name, invite string) (token, account string, err error) {
	const q = `mutation($name: String!, $invite: String){ signUp(name: $name, invite: $invite){ token account{ id name } } }`
	var out struct {
		SignUp struct {
			Token   string
			Account struct{ ID, Name string }
		}
	}
	vars := map[string]any{"name": name}
	if invite != "" {
		vars["invite"] = invite
	}
	if err := client.Do(ctx, q, vars, &out); err != nil {
		var ae *apiclient.Error
		if invite == "" && errors.As(err, &ae) && ae.Code == "INVALID_INPUT" && ae.Extensions["field"] == "invite" {
			// A relay run with --signup invite: say where the invite goes.
			hinted := *ae
			hinted.Message += fmt.Sprintf("; with one, run relay login --server %s --signup %s --invite CODE, or open its link in the browser", client.Server, name)
			return "", "", &hinted
		}
		return "", "", err
	}
	a := out.SignUp.Account
	return out.SignUp.Token, fmt.Sprintf("%s (new account %s)", a.Name, a.ID), nil
}

// loginJSON is `relay login -o json`.
type loginJSON struct {
	Server    string      `json:"server"`
	Account   accountJSON `json:"account"`
	Endpoints int         `json:"endpoints"` // how many the account has
	Config    string      `json:"config"`    // the file the token is stored in
}

type accountJSON struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// CheckToken asks for something only a valid token may read, so a login
// never stores a token the relay refuses.
func CheckToken(ctx context.Context, client *apiclient.Client) (endpoints int, account accountJSON, err error) {
	var out struct{ Me *accountJSON }
	if err := client.Do(ctx, `{ me{ id name } }`, nil, &out); err != nil {
		return 0, accountJSON{}, err
	}
	if out.Me == nil {
		// The operator's admin token reads the operator's fields (which
		// spend no refused-token attempt); it acts for no account.
		if client.Do(ctx, `{ accountsUsage(first: 1){ accountId } }`, nil, nil) == nil {
			return 0, accountJSON{}, &apiclient.Error{Code: "FORBIDDEN", Message: "this is the relay's admin token: it acts for no account, so relay login does not keep it; " +
				"give it to the operator's commands (relay accounts, relay events --server) with --admin-token, and log in with an account's token"}
		}
		return 0, accountJSON{}, &apiclient.Error{Message: "the relay does not know this token", Code: "UNAUTHENTICATED"}
	}
	type id struct{ ID string }
	eps, err := apiclient.Endpoints(ctx, client, "id", func(e id) string { return e.ID })
	if err != nil {
		return 0, accountJSON{}, fmt.Errorf("count endpoints: %w", err)
	}
	return len(eps), *out.Me, nil
}

// maxTokenInput bounds the first line of standard input read as a token
// (the relay's tokens are under 100 bytes): a longer one is refused, not
// cut to a prefix that would be sent as the token.
const maxTokenInput = 4 << 10

// readToken reads a token from standard input: its first line, trimmed,
// reading at most maxTokenInput bytes and one more.
func readToken(stdin io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(stdin, maxTokenInput+1))
	if err != nil {
		return "", fmt.Errorf("read token from standard input: %w", err)
	}
	line, _, found := strings.Cut(string(b), "\n")
	if !found && len(b) > maxTokenInput {
		return "", cmdutil.Usage(fmt.Errorf("the token on standard input is over %d KiB, the most its first line is read for: pipe in the token alone", maxTokenInput>>10))
	}
	if t := strings.TrimSpace(line); t != "" {
		return t, nil
	}
	return "", cmdutil.Usage(errors.New("no token on standard input (not a terminal): pipe one in, pass --token T or set RELAY_TOKEN, create an account with --signup NAME, or approve this machine in the browser with --device"))
}
