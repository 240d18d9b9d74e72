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
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// RemoveBinary deletes the built binary's folder; call it from TestMain
// after m.Run so test runs leave nothing behind.
func RemoveBinary() {
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
}

// ModuleRoot is the repository root (where go.mod is).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Build builds ./cmd/relay once per test process and returns its path. It
// is for TestMain, where there is no testing.TB; tests call Binary.
func Build() (string, error) {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "relay-bin-")
		if err != nil {
			buildErr = fmt.Errorf("build relay: %w", err)
			return
		}
		binPath = filepath.Join(dir, "relay")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/relay")
		cmd.Dir = ModuleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build relay: %w\n%s", err, out)
		}
	})
	return binPath, buildErr
}

// Binary builds ./cmd/relay once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
