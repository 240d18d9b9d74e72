// Package explain says, in words and with times, why a delivery's sender
// got the status it got: the facts of the log that decided it. It reads
// the views only (the delivery's row and attempts, and the agent sessions
// they name), never the log, so a page of explanations costs a few view
// reads per row (docs/explanations.md).
//
// The relay's own decisions are recognised by the reasons the domain names
// (domain.ReasonWrongProtocol, domain.FailureNoAgent, …); any other error
// of an attempt is the agent's report of its local target.
package explain
