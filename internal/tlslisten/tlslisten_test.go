package tlslisten

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for names and its key under dir.
func selfSigned(t *testing.T, dir string, serial int64, names ...string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestCheckCovers(t *testing.T) {
	tests := []struct {
		names   []string
		domain  string
		wantErr string
	}{
		{names: []string{"*.relay.example.com", "relay.example.com"}, domain: "relay.example.com"},
		{names: []string{"*.RELAY.example.com", "relay.example.com"}, domain: "relay.example.com."},
		{names: []string{"*.localhost", "localhost"}, domain: "localhost"},
		{names: []string{"relay.example.com"}, domain: "relay.example.com", wantErr: "does not cover *.relay.example.com"},
		{names: []string{"*.relay.example.com"}, domain: "relay.example.com", wantErr: "does not cover relay.example.com"},
		{names: []string{"ep1.relay.example.com", "relay.example.com"}, domain: "relay.example.com", wantErr: "*.relay.example.com"},
		{names: []string{"*.example.com", "example.com"}, domain: "relay.example.com", wantErr: "does not cover *.relay.example.com"},
		{names: []string{"other.example"}, domain: "relay.example.com", wantErr: "does not cover relay.example.com and *.relay.example.com"},
	}
	for _, tt := range tests {
		cf, kf := selfSigned(t, t.TempDir(), 1, tt.names...)
		_, err := Load(cf, kf, tt.domain, nil)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%v for %s: %v", tt.names, tt.domain, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%v for %s: %v, want an error naming %q", tt.names, tt.domain, err, tt.wantErr)
		}
	}
}

// TestReloadKeepsTheCurrentOnFailure: a renewal that is half written, or
// one for another domain, leaves the working certificate in place.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	cf, kf := selfSigned(t, dir, 1, "*.localhost", "localhost")
	c, err := Load(cf, kf, "localhost", nil)
	if err != nil {
		t.Fatal(err)
	}
	selfSigned(t, dir, 2, "*.localhost", "localhost")
	if err := c.Reload(); err != nil || c.Current().Leaf.SerialNumber.Int64() != 2 {
		t.Fatalf("reload: %v, serial %v", err, c.Current().Leaf.SerialNumber)
	}
	selfSigned(t, dir, 3, "other.example")
	if err := c.Reload(); err == nil || c.Current().Leaf.SerialNumber.Int64() != 2 {
		t.Fatalf("reload of a certificate for another domain: %v, serial %v", err, c.Current().Leaf.SerialNumber)
	}
	if err := os.WriteFile(kf, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(); err == nil || c.Current().Leaf.SerialNumber.Int64() != 2 {
		t.Fatalf("reload of a broken key: %v, serial %v", err, c.Current().Leaf.SerialNumber)
	}
}

// TestListenerSortsConnections: TLS and plain HTTP on one port; a client
// that says nothing is dropped after the handshake timeout without
// holding up the others.
func TestListenerSortsConnections(t *testing.T) {
	cf, kf := selfSigned(t, t.TempDir(), 7, "*.localhost", "localhost")
	certs, err := Load(cf, kf, "localhost", nil)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(inner, certs.Config(), 300*time.Millisecond, nil)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				kind := "plain"
				if st := State(c); st != nil {
					kind = "tls/" + st.NegotiatedProtocol
				}
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, kind+" "+line)
			}()
		}
	}()
	addr := inner.Addr().String()

	silent, err := net.Dial("tcp", addr) // holds no one up, and is closed
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	plain, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(plain, "GET / HTTP/1.1\n")
	if got, _ := bufio.NewReader(plain).ReadString('\n'); got != "plain GET / HTTP/1.1\n" {
		t.Errorf("plain connection: %q", got)
	}
	plain.Close()

	pool := x509.NewCertPool()
	pool.AddCert(certs.Current().Leaf)
	tc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "ep1.localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(tc, "hello\n")
	if got, _ := bufio.NewReader(tc).ReadString('\n'); got != "tls/h2 hello\n" {
		t.Errorf("TLS connection: %q", got)
	}
	tc.Close()

	// The silent client is cut off: the read ends (EOF or reset), not by
	// the test's own deadline.
	_ = silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = silent.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); err == nil || (ok && ne.Timeout()) {
		t.Errorf("a silent connection was not closed by the server: %v", err)
	}
}
