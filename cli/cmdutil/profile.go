package cmdutil

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// StartProfiles starts a CPU profile and an execution trace of the whole
// run, each into its file when its path is not empty (hidden flags, for
// performance and latency work). stop ends both and closes the files.
func StartProfiles(cpuProfile, tracePath string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, p := range []struct {
		path, what string
		start      func(io.Writer) error
		end        func()
	}{
		{cpuProfile, "cpu profile", pprof.StartCPUProfile, pprof.StopCPUProfile},
		{tracePath, "trace", trace.Start, trace.Stop},
	} {
		if p.path == "" {
			continue
		}
		f, err := os.Create(p.path)
		if err != nil {
			return stop, fmt.Errorf("%s: %w", p.what, err)
		}
		if err := p.start(f); err != nil {
			f.Close()
			return stop, fmt.Errorf("%s: %w", p.what, err)
		}
		stops = append(stops, func() { p.end(); f.Close() })
	}
	return stop, nil
}
