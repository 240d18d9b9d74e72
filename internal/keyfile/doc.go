// Package keyfile creates a key file once, safely when several processes
// start at the same time on one shared folder (the nodes of a cluster
// sharing their keys): the file appears whole, and every process ends up
// with the same content.
package keyfile
