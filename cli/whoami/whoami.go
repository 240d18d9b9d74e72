// Package whoami is `relay whoami`: the relay, account and token this
// machine's client commands use, and where each was found.
package whoami

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/internal/termtext"
)

// whoamiJSON is what `relay whoami -o json` prints. Account and Member
// are null, and Admin true, for the relay's admin token, which acts for
// no account; Member is null for a token made without one (relay login
// --signup).
type whoamiJSON struct {
	Server     string       `json:"server"`
	ServerFrom string       `json:"serverFrom"`
	Admin      bool         `json:"admin"`
	Account    *accountJSON `json:"account"`
	Member     *memberJSON  `json:"member"`
	Token      tokenJSON    `json:"token"`
}

type accountJSON struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type memberJSON struct {
	Login string `json:"login"`
	Role  string `json:"role"`
}

// tokenJSON is the token in use: its id and name as the relay lists it
// (null for the admin token, which it does not list) and where the CLI
// found it (--token, RELAY_TOKEN or the config file's path).
type tokenJSON struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
	From string  `json:"from"`
}

// Command is `relay whoami`.
func Command(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use: "whoami",
		// What gh (auth status), netlify and others call it.
		SuggestFor: []string{"status"},
		Short:      "Show the relay, account and token this machine uses, and where each was found",
		Long: `Show the relay the client commands talk to, the account (and member) its
token acts for, and which token that is, with where each came from: a flag,
the environment (RELAY_SERVER, RELAY_TOKEN) or the file relay login wrote.
The relay's admin token (relay serve --admin-token) acts for no account:
whoami says so. Without a token, or with one the relay refuses, it exits 2
as every client command does; relay login signs in (again).`,
		Example: `  relay whoami
  relay whoami --server https://relay.example.com
  relay whoami -o json | jq -r .account.name`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			who, err := lookUp(c.Context(), client)
			if err != nil {
				return fmt.Errorf("whoami: %w", err)
			}
			who.Server, who.ServerFrom, who.Token.From = conn.Server, conn.ServerFrom, conn.TokenFrom
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, who)
			}
			return printWhoami(stdout, who)
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

// lookUp asks the relay who client's token is, in one request; only when
// the relay refuses the token (UNAUTHENTICATED), or says it acts for no
// account (FORBIDDEN, as it answers the admin token), a second one asks
// whether it is the admin token (accountsUsage answers the operator
// alone). A token that is neither gets the first refusal, as every client
// command gives it.
func lookUp(ctx context.Context, client *apiclient.Client) (whoamiJSON, error) {
	var res struct {
		Me *struct {
			accountJSON
			Member *memberJSON
		}
		Tokens []struct {
			ID, Name string
			Current  bool
		}
	}
	err := client.Do(ctx, `{ me{ id name member{ login role } } tokens{ id name current } }`, nil, &res)
	var refused *apiclient.Error
	if errors.As(err, &refused) && (refused.Code == "UNAUTHENTICATED" || refused.Code == "FORBIDDEN") {
		if client.Do(ctx, `{ accountsUsage(first: 1){ accountId } }`, nil, nil) == nil {
			return whoamiJSON{Admin: true}, nil
		}
		return whoamiJSON{}, err
	}
	if err != nil {
		return whoamiJSON{}, err
	}
	if res.Me == nil { // not seen: tokens is refused first; read as relay login reads it
		return whoamiJSON{}, &apiclient.Error{Message: "the relay does not know this token", Code: "UNAUTHENTICATED", Server: client.Server}
	}
	who := whoamiJSON{Account: &res.Me.accountJSON, Member: res.Me.Member}
	for _, t := range res.Tokens {
		if t.Current {
			who.Token.ID, who.Token.Name = &t.ID, &t.Name
		}
	}
	return who, nil
}

// printWhoami writes who as aligned lines: relay, account, member (when
// the token acts for one), token.
func printWhoami(w io.Writer, who whoamiJSON) error {
	safe := func(s string) string { return termtext.Safe(s, false) }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "relay:\t%s, %s\n", who.Server, found(who.ServerFrom))
	token := "the relay's admin token (relay serve --admin-token)"
	if who.Admin {
		fmt.Fprintln(tw, "account:\tnone: the admin token acts for no account; relay accounts and relay events verify --server take it as --admin-token")
	} else {
		fmt.Fprintf(tw, "account:\t%s (%s)\n", safe(who.Account.Name), safe(who.Account.ID))
		if m := who.Member; m != nil {
			fmt.Fprintf(tw, "member:\t%s (%s)\n", safe(m.Login), safe(strings.ToLower(m.Role)))
		}
		token = "not listed by the relay"
		if who.Token.ID != nil {
			token = fmt.Sprintf("%s (%s)", safe(*who.Token.Name), safe(*who.Token.ID))
		}
	}
	fmt.Fprintf(tw, "token:\t%s, %s\n", token, found(who.Token.From))
	return tw.Flush()
}

// found says where Connection found a value: a flag, an environment
// variable, the default, or the config file at a path.
func found(from string) string {
	switch {
	case from == "default":
		return "the default"
	case strings.HasPrefix(from, "--"), strings.HasPrefix(from, "RELAY_"):
		return "from " + from
	}
	return "stored by relay login in " + from
}
