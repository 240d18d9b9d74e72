package accounts

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/commands"
)

// usageFields is what the quota commands read of an AccountUsage.
const usageFields = `accountId name storedBytes storageQuota rate storageOverride rateOverride apiCost apiCostOverride deliveries deliveriesLastDay refusals{ reason count }`

type usageJSON struct {
	AccountID         string  `json:"accountId"`
	Name              string  `json:"name"`
	StoredBytes       int64   `json:"storedBytes"`
	StorageQuota      *int64  `json:"storageQuota"` // null: unlimited
	Rate              *string `json:"rate"`         // null: unlimited
	StorageOverride   bool    `json:"storageOverride"`
	RateOverride      bool    `json:"rateOverride"`
	APICost           *string `json:"apiCost"` // null: unlimited
	APICostOverride   bool    `json:"apiCostOverride"`
	Deliveries        int64   `json:"deliveries"`
	DeliveriesLastDay int64   `json:"deliveriesLastDay"`
	Refusals          []struct {
		Reason string `json:"reason"`
		Count  int64  `json:"count"`
	} `json:"refusals"`
}

func accountsSetQuotaCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var storage, rate, apiCost, adminToken string
	cmd := &cobra.Command{
		Use:   "set-quota ACCOUNT [--storage 5GiB] [--rate 100/s] [--api-cost 600000/min] --server URL --admin-token T",
		Short: "Set an account's storage quota, delivery rate and API cost budget (the operator)",
		Example: `  RELAY_ADMIN_TOKEN=... relay accounts set-quota 01J... --storage 5GiB --rate 100/s --server https://relay.example.com
  relay accounts set-quota 01J... --storage default --rate off
  relay accounts set-quota 01J... --api-cost 600000/min,burst=100000`,
		Long: `Override an account's quota on the running relay (its --admin-token is
required). --storage: a size (5GiB, 500MB), off for unlimited, or default for
the relay's --account-storage; beyond it the account's Endpoints answer 507
and record nothing. A storage quota of its own (a size or off) also takes an
account made by open sign-up out of the storage every such account shares
(--signup-storage, a sixteenth per client network): raise a trusted account
out of it this way; default puts it back in. Accounts made by the operator
or with an invite are never in it. --rate: deliveries across all its
Endpoints as N/UNIT[,burst=B] (UNIT s, min or h), off, or default
(--account-rate); beyond it 429 with Retry-After. --api-cost: the GraphQL
cost points (as --max-query-cost counts them) its operations may spend, in
the same form, off, or default (--account-api-cost); beyond it operations
are RATE_LIMITED with retryAfterSeconds. A flag left out keeps the current value. The change
is an event in the account's stream: every node applies it.`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := cmdutil.BindEnv(c.Flags(), env); err != nil {
				return cmdutil.Usage(err)
			}
			if err := out.Check(); err != nil {
				return err
			}
			vars := map[string]any{"a": args[0]}
			if c.Flags().Changed("storage") {
				if _, err := commands.ParseStorageQuota(storage); err != nil {
					return cmdutil.Usage(fmt.Errorf("--storage: %w", err))
				}
				vars["s"] = storage
			}
			if c.Flags().Changed("rate") {
				if _, err := commands.ParseRateQuota(rate); err != nil {
					return cmdutil.Usage(fmt.Errorf("--rate: %w", err))
				}
				vars["r"] = rate
			}
			if c.Flags().Changed("api-cost") {
				if _, err := commands.ParseAPICostQuota(apiCost); err != nil {
					return cmdutil.Usage(fmt.Errorf("--api-cost: %w", err))
				}
				vars["c"] = apiCost
			}
			if len(vars) == 1 {
				return cmdutil.Usage(errors.New("give --storage, --rate, --api-cost or several"))
			}
			if adminToken == "" {
				return cmdutil.Usage(errors.New("set-quota needs the relay's --admin-token (--admin-token or RELAY_ADMIN_TOKEN)"))
			}
			if err := conn.Resolve(c.Flags(), env); err != nil {
				return err
			}
			var res struct{ SetAccountQuota usageJSON }
			q := `mutation($a: ID!, $s: String, $r: String, $c: String){ setAccountQuota(account: $a, storage: $s, rate: $r, apiCost: $c){ ` + usageFields + ` } }`
			if err := conn.Client(adminToken).Do(c.Context(), q, vars, &res); err != nil {
				return fmt.Errorf("set quota of account %s: %w", args[0], cmdutil.AdminRefused(err))
			}
			return printUsage(stdout, out, []usageJSON{res.SetAccountQuota})
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	cmd.Flags().StringVar(&storage, "storage", "", "storage quota: a size such as 5GiB, off, or default")
	cmd.Flags().StringVar(&rate, "rate", "", "deliveries across its Endpoints: N/UNIT[,burst=B], off, or default")
	cmd.Flags().StringVar(&apiCost, "api-cost", "", "GraphQL cost points its operations may spend: N/UNIT[,burst=B], off, or default")
	cmd.Flags().StringVar(&adminToken, "admin-token", "", "the running relay's --admin-token")
	return cmd
}

func accountsUsageCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var adminToken string
	var top int
	cmd := &cobra.Command{
		Use:   "usage [ACCOUNT] --server URL --admin-token T",
		Short: "Show what accounts store and receive, with their quotas (the operator)",
		Example: `  RELAY_ADMIN_TOKEN=... relay accounts usage --server https://relay.example.com
  relay accounts usage 01J... -o json`,
		Long: `Show an account's usage, or the --top accounts by stored bytes (most
first): bytes stored in the log, deliveries the log holds (all, and those
of the last 24 hours), its quota in force, and the requests this node refused by
its quota (counted per node since it started).`,
		Args: cmdutil.UsageArgs(cobra.MaximumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := cmdutil.BindEnv(c.Flags(), env); err != nil {
				return cmdutil.Usage(err)
			}
			if err := out.Check(); err != nil {
				return err
			}
			if top < 1 || top > 500 {
				return cmdutil.Usage(fmt.Errorf("--top %d: want 1 to 500", top))
			}
			if adminToken == "" {
				return cmdutil.Usage(errors.New("usage needs the relay's --admin-token (--admin-token or RELAY_ADMIN_TOKEN)"))
			}
			if err := conn.Resolve(c.Flags(), env); err != nil {
				return err
			}
			vars := map[string]any{"n": top}
			if len(args) == 1 {
				vars["a"] = args[0]
			}
			var res struct{ AccountsUsage []usageJSON }
			q := `query($a: ID, $n: Int){ accountsUsage(account: $a, first: $n){ ` + usageFields + ` } }`
			if err := conn.Client(adminToken).Do(c.Context(), q, vars, &res); err != nil {
				return fmt.Errorf("read usage: %w", cmdutil.AdminRefused(err))
			}
			return printUsage(stdout, out, res.AccountsUsage)
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	cmd.Flags().IntVar(&top, "top", 20, "how many accounts, most stored bytes first (1 to 500)")
	cmd.Flags().StringVar(&adminToken, "admin-token", "", "the running relay's --admin-token")
	return cmd
}

func printUsage(stdout io.Writer, out cmdutil.Output, rows []usageJSON) error {
	if out.JSON() {
		if len(rows) == 1 {
			return cmdutil.WriteJSON(stdout, rows[0])
		}
		return cmdutil.WriteJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tNAME\tSTORED\tSTORAGE QUOTA\tRATE\tAPI COST\tDELIVERIES\tLAST 24H\tREFUSED (THIS NODE)")
	for _, u := range rows {
		quota, rate, apiCost := "unlimited", "unlimited", "unlimited"
		if u.StorageQuota != nil {
			quota = humanize.IBytes(uint64(*u.StorageQuota))
		}
		if u.Rate != nil {
			rate = *u.Rate
		}
		if u.APICost != nil {
			apiCost = *u.APICost
		}
		if u.APICostOverride {
			apiCost += " (set)"
		}
		if u.StorageOverride {
			quota += " (set)"
		}
		if u.RateOverride {
			rate += " (set)"
		}
		refused := ""
		for _, r := range u.Refusals {
			if r.Count > 0 {
				refused += fmt.Sprintf("%s %d ", r.Reason, r.Count)
			}
		}
		if refused == "" {
			refused = "0"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", u.AccountID, u.Name, humanize.IBytes(uint64(u.StoredBytes)),
			quota, rate, apiCost, u.Deliveries, u.DeliveriesLastDay, refused)
	}
	return tw.Flush()
}
