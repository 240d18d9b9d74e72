// Package sqlitedsn builds the connection strings of the relay's SQLite
// files (the event log and the views), so both open their files the same way.
package sqlitedsn
