// Package wsgql serves GraphQL over WebSocket with the graphql-transport-ws
// protocol (github.com/enisdenjo/graphql-ws, PROTOCOL.md), as a gqlgen
// graphql.Transport.
//
// gqlgen's own transport closes every protocol violation with 1002, never
// closes a socket whose connection_init payload is not an object, runs a
// repeated subscribe id twice and has no bound on messages, subscriptions or
// what it queues for a slow reader; none of that is configurable. This one
// keeps the protocol's close codes and bounds every resource a client can
// make the server hold:
//
//   - each client message: Config.MaxMessage bytes (1009 beyond);
//   - operations per socket: Config.MaxSubscriptions (an error message with
//     extensions.code TOO_MANY_SUBSCRIPTIONS beyond; the socket stays);
//   - the messages those operations keep while they run: Config.HeldBytes
//     together, and one query or mutation beside them; an operation past
//     both waits for room, read, with at most Config.WaitBytes of others
//     (default: the socket's message limit) and for Config.WaitTimeout (an
//     error message with extensions.code REQUEST_TOO_LARGE beyond either;
//     the socket stays);
//   - sockets per client address: Config.MaxSocketsPerClient, and per
//     client network over all its addresses: Config.MaxSocketsPerNetwork
//     (HTTP 429 before the upgrade beyond);
//   - what waits to be written: Config.SendQueueBytes; a socket whose queue
//     stays full for Config.WriteTimeout, or that does not take a message
//     within it, is closed with 1008;
//   - silence: a client that sends nothing for twice Config.KeepAlive (the
//     server pings every KeepAlive) is dropped; one that sends no
//     connection_init within that time is closed with 4408.
//
// A subscription resolver that loads large items before it sends them calls
// AwaitRoom first and hands the item on with its Turn, so a socket holds one
// such item beyond its queue at a time, loaded only while its queue has room.
package wsgql
