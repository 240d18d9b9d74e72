// Package readmodel holds the rows the read models hand out (inspectors,
// Endpoints, deliveries, accounts, the runner's health). It is plain data
// with no storage behind it, so the layers that read views (commands, the
// API, the composition root) depend on these types, not on the SQLite
// package that fills them.
package readmodel
