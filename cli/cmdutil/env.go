package cmdutil

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// BindEnv fills every flag the user did not set from RELAY_<FLAG_NAME>.
func BindEnv(fs *pflag.FlagSet, env func(string) string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		name := "RELAY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := env(name); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, e)
			}
		}
	})
	return err
}

// NewLogger is the text logger of the long-running commands at level.
func NewLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// Colourful reports whether w is a terminal that takes ANSI colours.
func Colourful(w io.Writer, env func(string) string) bool {
	if env("NO_COLOR") != "" || env("TERM") == "dumb" {
		return false
	}
	return IsTerminal(w)
}

// IsTerminal reports whether v is a character device (a terminal, or
// /dev/null: CanAsk is the stricter test).
func IsTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// JoinClose returns err, else the error of closing what was used.
func JoinClose(err, closeErr error) error {
	if err != nil {
		return err
	}
	return closeErr
}

// Deref is *s, or none when s is nil.
func Deref(s *string, none string) string {
	if s == nil {
		return none
	}
	return *s
}
