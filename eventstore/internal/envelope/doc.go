// Package envelope holds the rules every event store adapter applies the same
// way: which appends are well formed, and how an event's Metadata is stored.
//
// Keeping them in one place is what lets the embedded SQLite log be exported
// into EventStoreDB (or the other way round) without an event being accepted
// by one adapter and refused by the other.
package envelope
