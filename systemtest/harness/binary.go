package harness

import (
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
	buildOut  []byte
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

// Binary builds ./cmd/relay once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "relay-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "relay")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/relay")
		cmd.Dir = ModuleRoot()
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build relay: %v\n%s", buildErr, buildOut)
	}
	return binPath
}
