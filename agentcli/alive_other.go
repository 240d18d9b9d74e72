//go:build !unix

package agentcli

import (
	"net"
	"time"
)

// staleAfter is how long a connection may sit idle and still be reused
// where alive cannot peek: local servers close idle connections after a
// few seconds (Node.js after 5), so one used within a second is open.
const staleAfter = time.Second

// alive tells whether an idle connection to the local target may be
// reused: here, without a peek, when it has been idle only briefly.
func alive(_ net.Conn, idleFor time.Duration) bool { return idleFor < staleAfter }
