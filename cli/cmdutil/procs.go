package cmdutil

import "runtime"

// OneProc runs the process's Go code on one thread at a time unless
// GOMAXPROCS is set. The agent waits on sockets almost all the time; with
// more Ps, the scheduler spins threads looking for work and wakes them for
// every forward, which cost it more CPU than its work does (12-16 % of its
// CPU per forward at one and 16 senders, the same throughput at 64:
// docs/benchmarks.md).
func OneProc(env func(string) string) {
	if env("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
