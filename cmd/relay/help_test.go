package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestEveryCommandHasHelp: every command of relay --help has a short
// description and examples, and --help exits cleanly.
func TestEveryCommandHasHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, func(string) string { return "" }, strings.NewReader(""), &out, &out); err != nil {
		t.Fatal(err)
	}
	// A fresh tree: run above consumed its own.
	root := &cobra.Command{Use: "relay"}
	root.AddCommand(commands(nil, nil, &out, &out)...)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Short == "" || sub.Example == "" {
				t.Errorf("relay %s: Short %q, Example %q; want both", sub.CommandPath(), sub.Short, sub.Example)
			}
			walk(sub)
		}
	}
	walk(root)
	for _, args := range [][]string{{"listen", "--help"}, {"help", "agent"}, {"endpoints", "create", "--help"}} {
		out.Reset()
		if err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &out); err != nil {
			t.Errorf("relay %v: %v", args, err)
		}
		if !strings.Contains(out.String(), "Examples:") {
			t.Errorf("relay %v prints no examples:\n%s", args, out.String())
		}
	}
}

// TestEveryCommandIsGrouped: relay --help lists every command under a
// heading; only cobra's own (completion, help) and version are left over.
func TestEveryCommandIsGrouped(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, func(string) string { return "" }, strings.NewReader(""), &out, &out); err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(out.String(), "Additional Commands:\n")
	if !ok {
		t.Fatalf("no Additional Commands in:\n%s", out.String())
	}
	rest, _, _ = strings.Cut(rest, "\n\n")
	for _, line := range strings.Split(rest, "\n") {
		name := strings.Fields(line)[0]
		if name != "completion" && name != "help" && name != "version" {
			t.Errorf("relay %s is under no heading of relay --help", name)
		}
	}
}

// TestREADMEConfigurationNamesEveryServeFlag: every flag of relay serve
// has a row in the README's configuration tables, which say that every
// flag has one.
func TestREADMEConfigurationNamesEveryServeFlag(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, conf, ok := strings.Cut(string(b), "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no ## Configuration section")
	}
	conf, _, _ = strings.Cut(conf, "\n## ")
	rows := map[string]bool{}
	for _, line := range strings.Split(conf, "\n") {
		if cell, ok := strings.CutPrefix(line, "| "); ok {
			cell, _, _ = strings.Cut(cell, " |")
			for _, name := range strings.Split(cell, ", ") {
				rows[strings.Trim(name, "`")] = true
			}
		}
	}
	root := &cobra.Command{Use: "relay"}
	root.AddCommand(commands(func(string) string { return "" }, nil, io.Discard, io.Discard)...)
	serve, _, err := root.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	serve.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && !rows["--"+f.Name] {
			t.Errorf("relay serve --%s has no row in the README's configuration tables", f.Name)
		}
	})
}
