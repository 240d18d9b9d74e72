package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	buildMu  sync.Mutex
	buildDir string            // one temporary folder for every program built
	built    map[string]string // package → its binary
)

// RemoveBinary deletes the built binaries' folder; call it from TestMain
// after m.Run so test runs leave nothing behind.
func RemoveBinary() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// ModuleRoot is the repository root (where go.mod is).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BuildPackage builds the main package pkg (a path from the module root,
// such as ./cmd/relay) once per test process and returns its binary.
func BuildPackage(pkg string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin, nil
	}
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "relay-bin-")
		if err != nil {
			return "", fmt.Errorf("build %s: %w", pkg, err)
		}
		buildDir, built = dir, map[string]string{}
	}
	bin := filepath.Join(buildDir, filepath.Base(pkg))
	// Built as releases are (scripts/lib/dist.sh): static and trimmed. The
	// tests then run the binary users get, and a release build in a test
	// (the npm package's) reuses these compiled packages and only links.
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Dir = ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, out)
	}
	built[pkg] = bin
	return bin, nil
}

// Build builds ./cmd/relay once per test process and returns its path. It
// is for TestMain, where there is no testing.TB; tests call Binary.
func Build() (string, error) { return BuildPackage("./cmd/relay") }

// Binary builds ./cmd/relay once per test process and returns its path.
func Binary(t testing.TB) string { return BinaryOf(t, "./cmd/relay") }

// BinaryOf is BuildPackage for a test: it fails the test when the build does.
func BinaryOf(t testing.TB, pkg string) string {
	t.Helper()
	bin, err := BuildPackage(pkg)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
