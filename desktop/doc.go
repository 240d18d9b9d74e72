// Package desktop is the desktop agent's application behind its window
// (cmd/relay-desktop, built with Wails): it signs in to a relay, keeps the
// token in the system keyring, switches the agent library (agentcli) on for
// chosen Endpoints, and gives the window the live deliveries, their detail
// and Retry, with a tray icon on Linux. The window's pages reuse the
// console's detail pane, so a delivery reads the same in both.
package desktop
