package agentcli

import (
	"crypto/tls"

	"github.com/relayhq/relay/apiclient"
)

// MaxCAFile bounds what --ca-file (RELAY_CA_FILE) is read for: the bound
// of apiclient.TLSConfig, which every client of a relay reads it with.
const MaxCAFile = apiclient.MaxCAFile

// TLSConfig is apiclient.TLSConfig: the system's roots plus the PEM
// certificates in caFile, read up to MaxCAFile bytes.
func TLSConfig(caFile string) (*tls.Config, error) { return apiclient.TLSConfig(caFile) }
