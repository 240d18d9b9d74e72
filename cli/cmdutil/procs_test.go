package cmdutil

import (
	"runtime"
	"testing"
)

// TestOneProc: one P unless GOMAXPROCS says otherwise.
func TestOneProc(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int
	}{
		{"unset", nil, 1},
		{"GOMAXPROCS set", map[string]string{"GOMAXPROCS": "3"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GOMAXPROCS(3)
			OneProc(func(k string) string { return tc.env[k] })
			if got := runtime.GOMAXPROCS(0); got != tc.want {
				t.Errorf("GOMAXPROCS %d, want %d", got, tc.want)
			}
		})
	}
}
