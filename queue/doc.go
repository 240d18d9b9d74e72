// Package queue drives the queues of QUEUE Endpoints (docs/queue.md): it
// reads the due deliveries from the queue view in bounded batches, sends
// each through a connected listener within the Endpoint's in-flight and
// rate bounds, and records what follows each attempt (delivered, retry
// scheduled with backoff, dead) in the log, where the schedule lives. One
// node of a cluster drives the queues: the leader.
package queue
