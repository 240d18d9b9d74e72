package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/relayhq/relay/cli/deliveries"
)

// TestEveryDurationFlagTakesDays: every duration flag of every command
// reads days (the retention and lifetime flags are told in days, so a
// look-back or a timeout must not refuse them), through the one parser.
func TestEveryDurationFlagTakesDays(t *testing.T) {
	var out bytes.Buffer
	root := &cobra.Command{Use: "relay"}
	root.AddCommand(commands(nil, nil, &out, &out)...)
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "duration" {
				return
			}
			seen++
			if err := f.Value.Set("1d"); err != nil {
				t.Errorf("relay %s --%s 1d: %v", c.CommandPath(), f.Name, err)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if seen < 10 {
		t.Errorf("found %d duration flags; the walk missed the commands", seen)
	}
	for _, tc := range []struct{ flag, value string }{{"since", "1d"}, {"since", "36h"}} {
		if _, err := deliveries.TimeFlag(tc.value, time.Now()); err != nil {
			t.Errorf("--%s %s: %v", tc.flag, tc.value, err)
		}
	}
}
