package cmdutil

import (
	"fmt"
	"net/url"
	"strings"
)

// SmeeLocalhostNote is the line printed under a smee stream URL whose host
// is a name under localhost (a relay on this machine): curl and browsers
// take such names to the loopback address by themselves, but Node's and
// Go's resolvers (smee-client, Probot, gosmee) ask /etc/hosts and DNS,
// which on most machines do not know them (ENOTFOUND, "no such host"). It
// is "" for any other URL.
func SmeeLocalhostNote(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || !strings.HasSuffix(u.Hostname(), ".localhost") {
		return ""
	}
	return fmt.Sprintf("note: smee-client, Probot and gosmee look %s up in /etc/hosts and DNS, which may not know it (getaddrinfo ENOTFOUND); if so, add the line \"127.0.0.1 %s\" to /etc/hosts\n", u.Hostname(), u.Hostname())
}
