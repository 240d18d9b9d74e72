// Package graph is the GraphQL API (gqlgen): resolvers are thin adapters that
// send commands to the application service and read from the projections.
package graph
