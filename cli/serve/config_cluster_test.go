package serve

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/relayhq/relay/cli/cmdutil"
)

func TestServeClusterFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(serveConfig) bool
	}{
		{name: "defaults", check: func(c serveConfig) bool {
			return c.Bus == "" && c.NodeID == "" && c.NodeLease == 10*time.Second
		}},
		{name: "a cluster", args: []string{"--eventstore", "nats://a:4222", "--bus", "nats://a:4222,nats://b:4222", "--node-id", "relay-a", "--node-lease", "3s"},
			check: func(c serveConfig) bool {
				return len(c.busServers()) == 2 && c.NodeID == "relay-a" && c.NodeLease == 3*time.Second
			}},
		{name: "from the environment", env: map[string]string{"RELAY_BUS": "nats://a:4222", "RELAY_EVENTSTORE": "nats://a:4222", "RELAY_NODE_ID": "b", "RELAY_NODE_LEASE": "2s"},
			check: func(c serveConfig) bool {
				return c.Bus == "nats://a:4222" && c.NodeID == "b" && c.NodeLease == 2*time.Second
			}},
		{name: "bus without a shared log", args: []string{"--bus", "nats://a:4222"}, wantErr: "--bus needs a shared --eventstore"},
		{name: "bad bus URL", args: []string{"--eventstore", "nats://a:4222", "--bus", "nats://u:secret@a:4222,http://b"}, wantErr: "--bus: bus URL 2 of 2"},
		{name: "bad node id", args: []string{"--node-id", "a.b"}, wantErr: "--node-id"},
		{name: "short lease", args: []string{"--node-lease", "10ms"}, wantErr: "--node-lease"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c serveConfig
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c.flags(fs)
			err := fs.Parse(tt.args)
			if err == nil {
				err = cmdutil.BindEnv(fs, func(k string) string { return tt.env[k] })
			}
			if err == nil {
				err = c.validate()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			case tt.wantErr != "" && strings.Contains(err.Error(), "secret"):
				t.Fatalf("error shows the password: %v", err)
			case tt.check != nil && !tt.check(c):
				t.Fatalf("config = %+v", c)
			}
		})
	}
}
