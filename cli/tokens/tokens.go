// Package tokens is `relay tokens`: an account's tokens, one per device.
package tokens

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/domain"
)

// tokenJSON is a token as `relay tokens` prints it with -o json.
type tokenJSON struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	CreatedAt  string  `json:"createdAt"`
	LastUsedAt *string `json:"lastUsedAt"`
	ExpiresAt  *string `json:"expiresAt"`
	Current    bool    `json:"current"`
}

// createdTokenJSON is `relay tokens create -o json`: the token once.
type createdTokenJSON struct {
	Token  tokenJSON `json:"token"`
	Secret string    `json:"secret"`
}

const tokenFields = `id name createdAt lastUsedAt expiresAt current`

// Command is `relay tokens`.
func Command(env func(string) string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "tokens",
		Aliases: []string{"token"},
		Short:   "List, create and revoke your account's API tokens (one per device)",
		Example: `  relay tokens list
  relay tokens create ci --expires-in 90d
  relay tokens revoke 0190c1d2-...`,
	}
	cmd.AddCommand(tokensListCommand(env, stdout), tokensCreateCommand(env, stdout), tokensRevokeCommand(env, stdout))
	return cmd
}

func tokensListCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your tokens that are not revoked; * marks the one this machine uses",
		Example: `  relay tokens list
  relay tokens list -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			list, err := listTokens(c.Context(), client)
			if err != nil {
				return err
			}
			return cmdutil.WriteList(stdout, out, list, "\tID\tNAME\tCREATED\tLAST USED\tEXPIRES", func(t tokenJSON) string {
				mark := ""
				if t.Current {
					mark = "*"
				}
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", mark, t.ID, t.Name, cmdutil.LocalTime(t.CreatedAt), cmdutil.LocalTimeOr(t.LastUsedAt, "never"), cmdutil.LocalTimeOr(t.ExpiresAt, "never"))
			})
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

func tokensCreateCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var expiresIn string
	cmd := &cobra.Command{
		Use:   "create NAME [--expires-in 90d]",
		Short: "Create a token and print it (shown once; the relay keeps only its hash)",
		Example: `  relay tokens create ci --expires-in 90d
  relay tokens create laptop -o json | jq -r .secret`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := domain.ValidateTokenName(args[0]); err != nil {
				return cmdutil.Usage(fmt.Errorf("token name %q: %w", args[0], err))
			}
			vars := map[string]any{"name": args[0]}
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
			var res struct{ CreateToken createdTokenJSON }
			q := `mutation($name: String!, $expiresIn: String){ createToken(name: $name, expiresIn: $expiresIn){ token{ ` + tokenFields + ` } secret } }`
			if err := client.Do(c.Context(), q, vars, &res); err != nil {
				return fmt.Errorf("create token: %w", err)
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, res.CreateToken)
			}
			t := res.CreateToken.Token
			fmt.Fprintf(stdout, "token %s (%s), expires %s\n%s\n", t.Name, t.ID, cmdutil.LocalTimeOr(t.ExpiresAt, "never"), res.CreateToken.Secret)
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	cmd.Flags().StringVar(&expiresIn, "expires-in", "", "lifetime such as 30d, 12h or 90m (1m to 3650d); default: never expires")
	return cmd
}

func tokensRevokeCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use:     "revoke ID",
		Short:   "Revoke a token: it stops working at once, and agents using it are disconnected",
		Example: `  relay tokens revoke 0190c1d2-...`,
		Args:    cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			if err := revokeToken(c.Context(), client, args[0]); err != nil {
				if ae := (*apiclient.Error)(nil); errors.As(err, &ae) && ae.Code == "NOT_FOUND" {
					err = &apiclient.Error{Message: fmt.Sprintf("no token with id %q in this account (relay tokens list shows the ids)", args[0]), Code: "NOT_FOUND"}
				}
				return fmt.Errorf("revoke token %s: %w", args[0], err)
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, map[string]any{"id": args[0], "revoked": true})
			}
			fmt.Fprintf(stdout, "token %s revoked\n", args[0])
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

func listTokens(ctx context.Context, client *apiclient.Client) ([]tokenJSON, error) {
	var res struct{ Tokens []tokenJSON }
	if err := client.Do(ctx, `{ tokens{ `+tokenFields+` } }`, nil, &res); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return res.Tokens, nil
}

func revokeToken(ctx context.Context, client *apiclient.Client, id string) error {
	return client.Do(ctx, `mutation($id: ID!){ revokeToken(id: $id) }`, map[string]any{"id": id}, nil)
}

// RevokeCurrent revokes the token client uses, and returns its name.
func RevokeCurrent(ctx context.Context, client *apiclient.Client) (string, error) {
	list, err := listTokens(ctx, client)
	if err != nil {
		return "", err
	}
	for _, t := range list {
		if t.Current {
			return t.Name, revokeToken(ctx, client, t.ID)
		}
	}
	return "", fmt.Errorf("the relay lists no token in use")
}
