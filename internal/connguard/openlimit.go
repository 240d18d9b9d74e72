package connguard

// OpenReserve is how many of the process's file descriptors OpenCap keeps
// for the relay's own use beyond client connections: its data files and
// the views' SQLite connections (each holds the database, its WAL and its
// shared memory), outgoing sockets (NATS, EventStoreDB, the bus), the
// refused connections lingering (maxRefusing) and its logs.
const OpenReserve = 256

// OpenCap is the most client connections a process whose descriptor limit
// (RLIMIT_NOFILE) is nofile should hold open: the limit less OpenReserve,
// and never more than half of a limit that small. Zero for no known
// limit. Past the limit, accept() fails (net/http retries it, the client
// waits in the backlog) and so do the relay's own file opens (a new
// reader connection, a log file), so connections over it are refused
// cleanly instead.
func OpenCap(nofile uint64) int {
	if nofile == 0 {
		return 0
	}
	capped := min(nofile, 1<<30) // an "unlimited" limit is no reason to overflow
	return int(max(capped-min(capped, OpenReserve), capped/2))
}
