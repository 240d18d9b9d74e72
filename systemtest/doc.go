// Package systemtest holds end-to-end tests of the whole relay: the real
// binary on 127.0.0.1, real HTTP senders, the real agent, real local servers.
package systemtest
