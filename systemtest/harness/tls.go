package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// CA is a certificate authority a test makes to issue the relay's
// certificates; clients trust it through Pool or the PEM file at File.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	File string
	Pool *x509.CertPool
}

// NewCA makes a CA and writes its certificate to a file.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "relay systemtest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, File: filepath.Join(t.TempDir(), "ca.pem"), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	writeFile(t, ca.File, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Issue writes a server certificate for names with the given serial, and
// its key, to cert.pem and key.pem in dir. Each file is replaced in one
// rename, as renewal tools do.
func (ca *CA) Issue(t testing.TB, dir string, serial int64, names ...string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	// The key first: a reload between the two renames sees a mismatched
	// pair, keeps the old certificate, and loads the new one once the
	// certificate file changes too.
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return certFile, keyFile
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// StartTLS runs `relay serve --tls-cert certFile --tls-key keyFile` like
// Start; the harness then talks to it over https, trusting ca.
func StartTLS(t testing.TB, dir string, ca *CA, certFile, keyFile string, extra ...string) *Relay {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	args := append([]string{"--tls-cert", certFile, "--tls-key", keyFile}, extra...)
	r := &Relay{Data: dir, args: args, bin: Binary(t), roots: ca.Pool}
	r.tlsClient = r.TLSClient(false)
	r.start(t)
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// TLSClient is an https client for this relay: every host name
// (<id>.localhost, localhost) is dialled at its 127.0.0.1 port and
// verified against the test's CA. h2 offers HTTP/2, else only HTTP/1.1.
func (r *Relay) TLSClient(h2 bool) *http.Client {
	tr := &http.Transport{
		DialContext:         r.dialer(),
		TLSClientConfig:     r.ClientTLS(),
		DisableCompression:  true,
		ForceAttemptHTTP2:   h2,
		MaxIdleConnsPerHost: 16,
	}
	if !h2 {
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{
		Timeout: 60 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// ClientTLS trusts the test's CA.
func (r *Relay) ClientTLS() *tls.Config { return &tls.Config{RootCAs: r.roots} }

func (r *Relay) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, "127.0.0.1:"+strconv.Itoa(r.Port))
	}
}

// client is the client the harness's own requests use.
func (r *Relay) client() *http.Client {
	if r.tlsClient != nil {
		return r.tlsClient
	}
	return Client
}

// CloseIdleConnections drops the harness's kept-alive connections to the
// relay (tests that count connections per IP start from none).
func (r *Relay) CloseIdleConnections() {
	if r.tlsClient != nil {
		r.tlsClient.CloseIdleConnections()
	}
	Client.CloseIdleConnections()
}
