package desktop

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestStoreUsesTheSecretService: with a real Secret Service (GNOME
// Keyring on a private session bus) the token goes to it through
// go-keyring, not to the file, and is read back from it.
func TestStoreUsesTheSecretService(t *testing.T) {
	for _, bin := range []string{"dbus-daemon", "gnome-keyring-daemon"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed (Debian: apt-get install dbus gnome-keyring)", bin)
		}
	}
	home := t.TempDir()
	bus := privateBus(t)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", bus)
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(home, "run"))
	if err := os.MkdirAll(filepath.Join(home, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	// --unlock creates the login keyring with this password, unlocked, so
	// nothing prompts.
	kr := exec.Command("gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets")
	kr.Stdin = strings.NewReader("test-password")
	kr.Stdout, kr.Stderr = io.Discard, io.Discard
	if err := kr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kr.Process.Kill(); _ = kr.Wait() })
	conn, err := dbus.Connect(bus)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	harness.Eventually(t, 15*time.Second, "the Secret Service on the bus", func() bool {
		var owner string
		return conn.BusObject().Call("org.freedesktop.DBus.GetNameOwner", 0, "org.freedesktop.secrets").Store(&owner) == nil
	})

	file := LoginFile{path: filepath.Join(home, "config", "relay", "config.json")}
	s := Store{Config: file, Keyring: OSKeyring{}}
	const server, token = "http://relay.test:8080", "rly_in_the_keyring"
	where, err := s.Save(Credentials{Server: server, Token: token})
	if err != nil || where != InKeyring {
		t.Fatalf("Save = %q, %v; want it in the keyring", where, err)
	}
	if b, _ := os.ReadFile(file.path); strings.Contains(string(b), token) || !strings.Contains(string(b), server) {
		t.Errorf("file holds %s; want the relay's URL and no token", b)
	}
	c, where, err := s.Load()
	if err != nil || c.Token != token || where != InKeyring {
		t.Fatalf("Load = %+v, %q, %v; want the keyring's token", c, where, err)
	}
	if err := s.Forget(server); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := s.Load(); c.Token != "" {
		t.Errorf("after Forget the token is still found: %+v", c)
	}
}

// privateBus starts a session bus that starts no service on demand.
func privateBus(t *testing.T) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "session.conf")
	if err := os.WriteFile(config, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=/tmp</listen>
  <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
</busconfig>
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dbus-daemon", "--config-file="+config, "--nofork", "--nopidfile", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(addr) == "" {
		t.Fatalf("dbus-daemon printed no address: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return strings.TrimSpace(addr)
}
