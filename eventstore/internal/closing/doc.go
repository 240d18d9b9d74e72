// Package closing holds what every adapter's subscriptions say once they, or
// their store, are closed, so callers can branch on the same error whichever
// store runs underneath.
package closing
