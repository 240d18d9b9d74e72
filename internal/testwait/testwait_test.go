package testwait_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testwait"
)

// TestCheckForReturnsOnceTheCheckPasses: f is polled until it returns nil.
func TestCheckForReturnsOnceTheCheckPasses(t *testing.T) {
	var calls atomic.Int32
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n := calls.Load(); n != 3 {
		t.Errorf("f ran %d times, want 3", n)
	}
}

// fatalRecorder records a failure instead of ending the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
}

// TestCheckForFailsWithTheLastError: at the limit the test fails with what
// the last check said, and the checks were spaced by the interval, not
// spun.
func TestCheckForFailsWithTheLastError(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	var calls atomic.Int32
	testwait.CheckFor(rec, 50*time.Millisecond, 10*time.Millisecond, func() error {
		return fmt.Errorf("check %d failed", calls.Add(1))
	})
	n := calls.Load()
	if want := fmt.Sprintf("check %d failed", n); !strings.Contains(rec.msg, want) {
		t.Errorf("failure %q does not give the last error %q", rec.msg, want)
	}
	if n > 20 {
		t.Errorf("f ran %d times in 50ms at a 10ms interval: spinning", n)
	}
}
