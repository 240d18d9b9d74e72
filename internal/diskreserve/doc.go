// Package diskreserve keeps a relay-wide reserve of free disk under the data
// folder. Below twice the reserve the relay refuses new and anonymous work
// that would grow the disk (sign-ups, new inspectors and Endpoints, guest
// inspectors' deliveries); below the reserve it refuses every delivery and
// retry too. Reads, deletions, retention and quota changes are never refused,
// so retention keeps the room it needs to commit its deletions and free
// space again (docs/security.md, "A relay-wide reserve of free disk").
//
// The free space comes from a Source (statfs on the data folder), read at
// most once per Every however many requests ask.
package diskreserve
