//go:build unix

package agentcli

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// alive tells whether an idle connection to the local target is still
// open: a peek that does not wait finds nothing to read. A target that
// closed it while it sat idle has sent its FIN, and an idle connection
// has nothing else to say; net/http's Transport learns the same from the
// read it keeps pending on every idle connection.
func alive(raw net.Conn, _ time.Duration) bool {
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [1]byte
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		_, _, perr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // never wait
	})
	return err == nil && (errors.Is(perr, syscall.EAGAIN) || errors.Is(perr, syscall.EWOULDBLOCK))
}
