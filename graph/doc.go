// Package graph is the GraphQL API (gqlgen): resolvers are thin adapters that
// send commands to the application service and read the read models through
// the Views interface (views.go).
package graph
