// Package console serves the relay's web console: a single-page app made of
// plain ES modules and CSS, embedded in the binary with go:embed so the console
// works offline and a clean clone builds with nothing but Go.
//
// The app talks to the relay only through the public GraphQL API at /graphql
// (queries and mutations over HTTP POST, subscriptions over
// graphql-transport-ws), so it exercises exactly what any other client can use.
//
// Client-side routes are "/" (home), "/i/<id>" (an inspector's live history) and
// "/e/<id>" (an Endpoint's). [Handler] answers every such path with index.html
// and serves the static files under "/assets/".
package console
