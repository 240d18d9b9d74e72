package tlslisten

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// coverProbe is the label CheckCovers tries under the domain: a
// certificate that lists only some addresses' names does not cover it.
const coverProbe = "any-address"

// Certs is a certificate and key pair, loaded from two PEM files and
// reloaded when asked (Reload) or when the files change (Watch).
type Certs struct {
	certFile, keyFile, domain string
	log                       *slog.Logger

	cur atomic.Pointer[tls.Certificate]

	mu    sync.Mutex // serialises reloads
	stamp string     // the files' sizes and times at the last load attempt
}

// Load reads the pair and checks that it covers domain and every
// "<id>.<domain>".
func Load(certFile, keyFile, domain string, log *slog.Logger) (*Certs, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Certs{certFile: certFile, keyFile: keyFile, domain: domain, log: log}
	c.stamp = c.fileStamp()
	cert, err := c.load()
	if err != nil {
		return nil, err
	}
	c.cur.Store(cert)
	return c, nil
}

func (c *Certs) load() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	}
	if err := CheckCovers(cert.Leaf, c.domain); err != nil {
		return nil, fmt.Errorf("TLS certificate %s: %w", c.certFile, err)
	}
	if now := time.Now(); now.After(cert.Leaf.NotAfter) {
		c.log.Warn("the TLS certificate has expired: clients refuse it until it is renewed",
			"file", c.certFile, "not_after", cert.Leaf.NotAfter)
	}
	return &cert, nil
}

// CheckCovers tells whether leaf is valid for the bare domain and for any
// "<id>.<domain>" (a wildcard "*.<domain>").
func CheckCovers(leaf *x509.Certificate, domain string) error {
	if leaf == nil {
		return errors.New("no certificate in the file")
	}
	domain = strings.TrimSuffix(domain, ".")
	var missing []string
	if leaf.VerifyHostname(domain) != nil {
		missing = append(missing, domain)
	}
	if leaf.VerifyHostname(coverProbe+"."+domain) != nil {
		missing = append(missing, "*."+domain)
	}
	if len(missing) == 0 {
		return nil
	}
	names := leaf.DNSNames
	if len(names) == 0 {
		names = []string{"none"}
	}
	return fmt.Errorf("does not cover %s (it names %s); the relay needs a certificate for %s and *.%s",
		strings.Join(missing, " and "), strings.Join(names, ", "), domain, domain)
}

// Current is the certificate new handshakes get.
func (c *Certs) Current() *tls.Certificate { return c.cur.Load() }

// Config is a server TLS configuration that offers HTTP/2 and HTTP/1.1
// and always presents the current certificate.
func (c *Certs) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cur.Load(), nil
		},
	}
}

// Reload loads the files again and swaps the certificate in when they
// hold a valid pair that covers the domain; otherwise the current one
// stays and the error says why.
func (c *Certs) Reload() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stamp = c.fileStamp()
	cert, err := c.load()
	if err != nil {
		return err
	}
	c.cur.Store(cert)
	c.log.Info("TLS certificate loaded", "file", c.certFile, "serial", cert.Leaf.SerialNumber.String(),
		"not_after", cert.Leaf.NotAfter)
	return nil
}

// Watch reloads whenever the files' sizes or modification times change,
// checking every interval, and whenever reload receives, until ctx ends.
// A failed reload is logged and the current certificate kept; the files
// are tried again when they change again (a renewal that writes the
// certificate and the key one after the other is picked up once both are
// written).
func (c *Certs) Watch(ctx context.Context, interval time.Duration, reload <-chan os.Signal) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
		case <-t.C:
			c.mu.Lock()
			same := c.fileStamp() == c.stamp
			c.mu.Unlock()
			if same {
				continue
			}
		}
		if err := c.Reload(); err != nil {
			c.log.Error("TLS certificate not reloaded; the previous one stays in use", "error", err)
		}
	}
}

func (c *Certs) fileStamp() string {
	var b strings.Builder
	for _, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f) // follows symlinks, as certbot's live/ links are
		if err != nil {
			b.WriteString("missing;")
			continue
		}
		fmt.Fprintf(&b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}
