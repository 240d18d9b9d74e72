package apiclient

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
)

// MaxCAFile bounds what --ca-file (RELAY_CA_FILE) is read for: a system's
// whole bundle of public roots is about 220 KiB, a private CA's certificate
// a few KiB. A larger file, or a device that never ends, is refused having
// read MaxCAFile+1 bytes, where it was read whole.
const MaxCAFile = 1 << 20

// TLSConfig trusts the system's roots plus the PEM certificates in caFile
// (at most MaxCAFile bytes), for a relay whose certificate a private CA
// signed; nil (the system's roots alone) when caFile is empty.
// SSL_CERT_FILE, which Go reads, instead replaces the system's roots.
func TLSConfig(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	f, err := os.Open(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	defer f.Close()
	pem, err := io.ReadAll(io.LimitReader(f, MaxCAFile+1))
	if err != nil {
		return nil, fmt.Errorf("--ca-file %s: %w", caFile, err)
	}
	if len(pem) > MaxCAFile {
		return nil, fmt.Errorf("--ca-file %s: over %d MiB, the most a file of PEM certificates is read for (a system's whole bundle is about 220 KiB)", caFile, MaxCAFile>>20)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
