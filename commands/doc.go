// Package commands is the application service between the API and the
// domain: it loads an aggregate from its stream, asks it to decide, records
// the events it raised with the expected revision (through the
// record.Recorder, the log's one writer), and waits until the projections
// have applied them so the caller reads its own write.
package commands
