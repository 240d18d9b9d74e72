package record

import (
	"strings"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
)

// maxStoredText bounds the text of an agent's report the log keeps of one
// attempt (a response's header names and values, an error), so that the
// event stays within what relay events verify reads of an export line
// (evidence.MaxExportLine). The sender is still answered with all of it.
const maxStoredText = evidence.MaxEventText

// storedHeaders returns the leading headers of a response that fit
// maxStoredText bytes of names and values (never nil), and how many were
// left out, as ingress keeps a request's.
func storedHeaders(hs []domain.Header) ([]domain.Header, int) {
	size := 0
	for i, h := range hs {
		if size += len(h.Name) + len(h.Value); size > maxStoredText {
			return hs[:i:i], len(hs) - i
		}
	}
	if hs == nil {
		hs = []domain.Header{}
	}
	return hs, 0
}

// storedText is s cut to maxStoredText bytes.
func storedText(s string) string {
	if len(s) <= maxStoredText {
		return s
	}
	return strings.ToValidUTF8(s[:maxStoredText], "") + "…"
}
