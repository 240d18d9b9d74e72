// Package curl writes the curl command that replays a recorded request
// byte for byte (`relay deliveries show`, the console's Copy as curl).
package curl

import (
	"regexp"
	"strings"
)

// shellQuote wraps s in single quotes, where a POSIX shell expands nothing.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var (
	dotSegment = regexp.MustCompile(`/\.\.?(/|$|\?)`)
	urlGlob    = regexp.MustCompile(`[\[\]{}]`)
)

// Header is a header with its exact value bytes.
type Header struct{ Name, Value string }

// Command is a POSIX sh command that replays a recorded request byte
// for byte to baseURL (the address's public URL): method, raw path, every
// header in order with repeats, and the body. It is the console's Copy as
// curl (console/web/assets/curl.js): the sender's bytes reach the shell
// only inside single quotes and curl only as data; the body is piped as
// base64 through base64 -d into --data-binary @-, so curl reads no file
// (a body "@.env" would upload a local file) and a NUL survives.
func Command(method, baseURL, path string, headers []Header, bodyBase64 string, bodySize int) string {
	url := strings.TrimRight(baseURL, "/") + path
	parts := []string{"curl"}
	names := map[string]bool{}
	for _, h := range headers {
		names[strings.ToLower(h.Name)] = true
	}
	hasBody := bodySize > 0 || bodyBase64 != ""
	if method == "HEAD" {
		parts = append(parts, "--head")
	} else {
		parts = append(parts, "-X", shellQuote(method))
	}
	if dotSegment.MatchString(path) {
		parts = append(parts, "--path-as-is")
	}
	if urlGlob.MatchString(path) {
		parts = append(parts, "--globoff")
	}
	parts = append(parts, shellQuote(url))
	for _, h := range headers {
		switch strings.ToLower(h.Name) {
		case "host", "content-length":
			continue // curl computes them from the URL and the body
		}
		if h.Value == "" {
			parts = append(parts, "-H", shellQuote(h.Name+";"))
		} else {
			parts = append(parts, "-H", shellQuote(h.Name+": "+h.Value))
		}
	}
	for _, name := range []string{"User-Agent", "Accept"} {
		if !names[strings.ToLower(name)] {
			parts = append(parts, "-H", shellQuote(name+":"))
		}
	}
	if hasBody && !names["content-type"] {
		parts = append(parts, "-H", shellQuote("Content-Type:"))
	}
	if hasBody && !names["expect"] {
		parts = append(parts, "-H", shellQuote("Expect:"))
	}
	if !hasBody {
		return joinLines(parts)
	}
	parts = append(parts, "--data-binary", "@-")
	return "printf '%s' " + shellQuote(bodyBase64) + " | base64 -d | " + joinLines(parts)
}

// joinLines puts each option on its own line.
func joinLines(parts []string) string {
	var lines []string
	line := parts[0]
	for _, p := range parts[1:] {
		if strings.HasPrefix(p, "-") {
			lines = append(lines, line)
			line = "  " + p
		} else {
			line += " " + p
		}
	}
	return strings.Join(append(lines, line), " \\\n")
}
