// Package layers holds the test that keeps the package graph pointing
// inward: the core imports no framework or driver, and the application
// layer reads through its own interfaces, not the storage behind them.
package layers
