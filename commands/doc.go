// Package commands is the application service between the API and the
// domain: it loads an aggregate from its stream, asks it to decide, appends
// the events it raised with the expected revision, and waits until the
// projections have applied them so the caller reads its own write.
package commands
