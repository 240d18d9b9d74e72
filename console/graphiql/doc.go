// Package graphiql serves GraphiQL, React and ReactDOM from files embedded in
// the binary, so gqlgen's playground page works without reaching a CDN.
//
// The files are the unmodified builds from the npm packages graphiql@4.1.2,
// react@18.2.0 and react-dom@18.2.0 (see README.md). Mount [AssetsHandler]
// at a path prefix and pass [PlaygroundOptions] with the same prefix to
// playground.Handler.
package graphiql
