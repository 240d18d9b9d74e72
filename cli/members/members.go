// Package members is `relay members`: an account's members and invites.
package members

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/domain"
)

// memberJSON is a member as `relay members list -o json` prints it.
type memberJSON struct {
	ID       string `json:"id"`
	Login    string `json:"login"`
	Role     string `json:"role"`
	JoinedAt string `json:"joinedAt"`
	You      bool   `json:"you"`
}

// memberInviteJSON is `relay members invite -o json`: the link once.
type memberInviteJSON struct {
	URL       string `json:"url"`
	Role      string `json:"role"`
	ExpiresAt string `json:"expiresAt"`
}

// Command is `relay members`.
func Command(env func(string) string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "members",
		Aliases: []string{"member"},
		Short:   "List your account's members, invite someone by a one-time link, remove a member",
		Example: `  relay members list
  relay members invite --role member
  relay members remove 0190c1d2-...`,
	}
	cmd.AddCommand(membersListCommand(env, stdout), membersInviteCommand(env, stdout), membersRemoveCommand(env, stdout))
	return cmd
}

func membersListCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the account's members; * marks the one this machine acts for",
		Example: `  relay members list
  relay members list -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			list, err := listMembers(c.Context(), client)
			if err != nil {
				return err
			}
			if len(list) == 0 && !out.JSON() {
				// An account relay login --signup made: not an empty table.
				fmt.Fprintln(stdout, `no members: this account works with tokens only; give it a first owner with a login and password in the console (Settings, "Set up sign-in"), or invite someone with relay members invite`)
				return nil
			}
			return cmdutil.WriteList(stdout, out, list, "\tID\tLOGIN\tROLE\tJOINED", func(m memberJSON) string {
				mark := ""
				if m.You {
					mark = "*"
				}
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", mark, m.ID, m.Login, strings.ToLower(m.Role), cmdutil.LocalTime(m.JoinedAt))
			})
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

func membersInviteCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var role, expiresIn string
	cmd := &cobra.Command{
		Use:   "invite [--role member|owner] [--expires-in 2d]",
		Short: "Make a one-time link that lets one person join the account (owners only)",
		Example: `  relay members invite
  relay members invite --role owner --expires-in 1d`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			r, err := domain.ParseRole(role)
			if err != nil {
				return cmdutil.Usage(fmt.Errorf("--role %q: must be member or owner", role))
			}
			vars := map[string]any{"role": strings.ToUpper(string(r))}
			if c.Flags().Changed("expires-in") {
				if _, err := domain.ParseTokenLifetime(expiresIn); err != nil {
					return cmdutil.Usage(fmt.Errorf("--expires-in %q: %w", expiresIn, err))
				}
				vars["expiresIn"] = expiresIn
			}
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			var res struct {
				CreateMemberInvite struct {
					Path, Role, ExpiresAt string
					URL                   *string
				}
			}
			q := `mutation($role: MemberRole, $expiresIn: String){ createMemberInvite(role: $role, expiresIn: $expiresIn){ path url role expiresAt } }`
			if err := client.Do(c.Context(), q, vars, &res); err != nil {
				return fmt.Errorf("invite: %w", err)
			}
			inv := memberInviteJSON{URL: cmdutil.ConsolePage(client.Server, res.CreateMemberInvite.Path, res.CreateMemberInvite.URL),
				Role: res.CreateMemberInvite.Role, ExpiresAt: res.CreateMemberInvite.ExpiresAt}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, inv)
			}
			fmt.Fprintf(stdout, "one-time link to join as %s, until %s:\n%s\n", strings.ToLower(inv.Role), cmdutil.LocalTime(inv.ExpiresAt), inv.URL)
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	cmd.Flags().StringVar(&role, "role", "member", "the role the invitee gets: member or owner")
	cmd.Flags().StringVar(&expiresIn, "expires-in", "", "how long the link works, such as 2d or 12h (at most and by default 7d)")
	return cmd
}

func membersRemoveCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use:     "remove ID",
		Short:   "Remove a member (owners only): their sessions and tokens stop working at once",
		Example: `  relay members remove 0190c1d2-...`,
		Args:    cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			if err := client.Do(c.Context(), `mutation($id: ID!){ removeMember(id: $id) }`, map[string]any{"id": args[0]}, nil); err != nil {
				return fmt.Errorf("remove member %s: %w", args[0], err)
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, map[string]any{"id": args[0], "removed": true})
			}
			fmt.Fprintf(stdout, "member %s removed\n", args[0])
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

func listMembers(ctx context.Context, client *apiclient.Client) ([]memberJSON, error) {
	var res struct {
		Me *struct{ Members []memberJSON }
	}
	if err := client.Do(ctx, `{ me { members { id login role joinedAt you } } }`, nil, &res); err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	if res.Me == nil {
		return nil, fmt.Errorf("list members: %w", domain.ErrUnauthenticated)
	}
	return res.Me.Members, nil
}
