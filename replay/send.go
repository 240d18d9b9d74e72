package replay

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"

	"github.com/relayhq/relay/bundle"
)

// eachBundleRequest opens the bundle at path and hands fn each request in
// order. A line that cannot be read is a usage error naming it.
func eachBundleRequest(path string, fn func(bundle.Request) error) error {
	f, err := os.Open(path)
	if err != nil {
		return inputError(fmt.Errorf("replay: %w", err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return inputError(fmt.Errorf("replay: %s is a folder, not a bundle: give the file relay deliveries export --format bundle wrote", path))
	}
	br, err := bundle.NewReader(f)
	if err != nil {
		return bundleError(path, err)
	}
	for {
		r, err := br.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return bundleError(path, err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}

func bundleError(path string, err error) error {
	var le *bundle.LineError
	if errors.As(err, &le) {
		return inputError(fmt.Errorf("replay: %s: %w (nothing was sent)", path, err))
	}
	return fmt.Errorf("replay: %s: %w", path, err)
}

// send writes r on a connection of its own and reads the status of the
// answer. The request is written by hand, not by net/http's client, which
// would sort the headers, add User-Agent and Accept-Encoding, compute
// Content-Length itself, and write the target again from a parsed URL:
// replay sends the recorded bytes and nothing else (bundle.Request.WriteRequest).
func (p Replayer) send(ctx context.Context, r bundle.Request) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", p.Target.addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	// The deadline bounds every read and write; closing on ctx's end also
	// ends one blocked in the TLS handshake.
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if p.Target.tls {
		tc := tls.Client(conn, &tls.Config{ServerName: p.Target.serverName, InsecureSkipVerify: p.Target.Insecure, NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			return 0, fmt.Errorf("TLS: %w", err)
		}
		conn = tc
	}
	if err := r.WriteRequest(conn, p.Target.host, p.Target.prefix); err != nil {
		return 0, fmt.Errorf("send: %w", err)
	}
	// Every read of the answer goes through lr: each head (status line
	// and headers) may take maxAnswerHead of the connection, the body's
	// drain 1 MiB, whatever the target sends.
	lr := &answerLimit{r: conn}
	rd := bufio.NewReader(lr)
	for interim := 0; ; {
		lr.left = maxAnswerHead
		resp, err := http.ReadResponse(rd, &http.Request{Method: r.Method})
		if err != nil {
			return 0, fmt.Errorf("read the answer: %w", err)
		}
		// 100 Continue and other interim answers precede the real one.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			if interim++; interim > maxInterim {
				return 0, fmt.Errorf("read the answer: more than %d interim (1xx) answers before the final one", maxInterim)
			}
			continue
		}
		// Read some of the body, so a server still writing it is not
		// reset by the close; the status is what is reported.
		lr.left, lr.body = 1<<20, true
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
}

// maxAnswerHead bounds the status line and headers of one answer of the
// target that replay reads: the most a relay takes of a request's
// (--max-header-bytes is at most 1 MiB). Replay reports the status only.
const maxAnswerHead = 1 << 20

// maxInterim bounds the interim (1xx) answers read before the final one,
// as net/http's client does.
const maxInterim = 5

// errAnswerHead is an answer's head over maxAnswerHead.
var errAnswerHead = fmt.Errorf("its status line and headers are over %d MiB, the most replay reads of them", maxAnswerHead>>20)

// answerLimit reads at most left bytes of r, then fails: with
// errAnswerHead while a head is read, with io.EOF in the body's drain.
type answerLimit struct {
	r    io.Reader
	left int
	body bool
}

func (l *answerLimit) Read(p []byte) (int, error) {
	if l.left <= 0 {
		if l.body {
			return 0, io.EOF
		}
		return 0, errAnswerHead
	}
	n, err := l.r.Read(p[:min(len(p), l.left)])
	l.left -= n
	return n, err
}
