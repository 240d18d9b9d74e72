package cmdutil

import "runtime"

// OneProc runs the process's Go code on one thread at a time unless
// GOMAXPROCS is set. The agent waits on sockets almost all the time; with
// more Ps, the scheduler spins threads looking for work and wakes them for
// every forward: one P costs the agent about a fifth less CPU per forward
// at one and 16 senders, a tenth less at 64, with no less throughput
// (docs/benchmarks.md).
func OneProc(env func(string) string) {
	if env("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
