// Package open is `relay open`: a console link that signs the console in.
package open

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/cli/deliveries"
	"github.com/relayhq/relay/cli/login"
)

// openJSON is `relay open -o json`.
type openJSON struct {
	URL      string `json:"url"`
	SignedIn bool   `json:"signedIn"` // the link carries the stored token
}

// Command is `relay open`.
func Command(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var browser bool
	cmd := &cobra.Command{
		Use:   "open [ADDRESS]",
		Short: "Print a link that opens the console signed in (an Endpoint's or inspector's page, or home)",
		Long: `Print a link to the relay's console that signs it in with the token relay
login stored: an Endpoint's page (ADDRESS is its id or name), an inspector's
(its id), or the home page with the account's Endpoints. The token travels in
the link's fragment (#token=...), which browsers send to no server and put
in no Referer; the console stores it, as a pasted token, and removes it from
the address bar. The link holds the token: do not share it. Without a login
(an inspector's page), the link carries no token.`,
		Example: `  relay open
  relay open my-app --browser
  xdg-open "$(relay open my-app)"`,
		Args: cmdutil.UsageArgs(cobra.MaximumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := conn.StartTokenOptional(c, env, out); err != nil {
				return err
			}
			page := "/"
			if len(args) == 1 {
				kind, id, err := deliveries.ResolveAddress(c.Context(), conn.Client(conn.Token), args[0])
				if err != nil {
					return err
				}
				page = "/" + kind[:1] + "/" + url.PathEscape(id)
			} else if conn.Token == "" {
				return cmdutil.ErrNotLoggedIn
			}
			link := strings.TrimRight(conn.Server, "/") + page
			if conn.Token != "" {
				if _, _, err := login.CheckToken(c.Context(), conn.Client(conn.Token)); err != nil {
					return err
				}
				link += "#token=" + url.QueryEscape(conn.Token)
			}
			if out.JSON() {
				if err := cmdutil.WriteJSON(stdout, openJSON{URL: link, SignedIn: conn.Token != ""}); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(stdout, link)
				if conn.Token != "" {
					fmt.Fprintln(stderr, "the link holds your token: open it yourself, do not share it")
				}
			}
			if browser {
				return openBrowser(link)
			}
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	cmd.Flags().BoolVar(&browser, "browser", false, "also open the link in the default browser")
	return cmd
}

// openerWait is how long relay open waits for the system's opener to
// fail: xdg-open with no browser to start exits at once ("no method
// available"); one still running by then is taken to be opening it.
const openerWait = 5 * time.Second

// openBrowser hands link to the system's opener, and says so when the
// opener fails, as on a machine with no browser (over SSH).
func openBrowser(link string) error {
	var name string
	var args []string
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler"}
	default:
		name = "xdg-open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return errors.New("no browser opener (" + name + ") on PATH: open the printed link yourself")
	}
	cmd := exec.Command(path, append(args, link)...)
	var said bytes.Buffer
	cmd.Stderr = &said
	// A browser the opener starts may keep its stderr: its exit is what counts.
	cmd.WaitDelay = 100 * time.Millisecond
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("open the browser: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("%s could not open a browser (exit %d%s): open the printed link yourself", name, exit.ExitCode(), lastLine(said.String(), link))
		}
	case <-time.After(openerWait):
	}
	return nil
}

// lastLine is ": " and the last line an opener wrote, or "": the link,
// which holds the token, said as "the link".
func lastLine(text, link string) string {
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(text, link, "the link")), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return ": " + last
	}
	return ""
}
