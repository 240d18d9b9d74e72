package endpoints

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/cli/cmdutil"
)

// AnswerJSON and HandshakesJSON are an address's own answer and handshakes
// as the commands print them with -o json (secrets masked by the relay).
type (
	AnswerJSON struct {
		Status  int                `json:"status"`
		Headers []answerHeaderJSON `json:"headers"`
		Body    string             `json:"body"`
	}
	answerHeaderJSON struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	HandshakesJSON struct {
		Enabled            []string `json:"enabled"`
		MetaVerifyTokenSet bool     `json:"metaVerifyTokenSet"`
		ZoomSecretSet      bool     `json:"zoomSecretSet"`
		InProxy            string   `json:"inProxy"`
	}
)

const AnswerFields = `answer{ status headers{ name value } body } handshakes{ enabled metaVerifyTokenSet zoomSecretSet inProxy }`

// maxAnswerFile bounds what --answer-body @FILE reads; the relay itself
// refuses a body over 64 KiB with the reason.
const maxAnswerFile = 1 << 20

// AnswerFlags set an address's own answer and handshakes.
type AnswerFlags struct {
	status     int
	headers    []string
	body       string
	handshakes []string
	metaToken  string
	metaFile   string
	zoomFile   string
	inProxy    string
}

func (f *AnswerFlags) Flags(cmd *cobra.Command, proxy bool) {
	fs := cmd.Flags()
	fs.IntVar(&f.status, "answer-status", 0, "status it answers (200 to 599; 204 with no header and body is the default again); 200 when only --answer-header or --answer-body is given")
	fs.StringArrayVar(&f.headers, "answer-header", nil, "header it answers, NAME=VALUE (repeatable)")
	fs.StringVar(&f.body, "answer-body", "", "body it answers (at most 64 KiB): TEXT, @FILE or @- for stdin")
	fs.StringSliceVar(&f.handshakes, "handshake", nil, "providers' verification requests it answers itself: slack, meta, msgraph, dropbox, zoom (comma-separated), or none")
	fs.StringVar(&f.metaToken, "meta-verify-token", "", "the verify token given to Meta (needed by --handshake meta); empty removes it. Visible to other users in the process list: prefer --meta-verify-token-file")
	fs.StringVar(&f.metaFile, "meta-verify-token-file", "", "file holding the verify token given to Meta (needed by --handshake meta); an empty file removes it")
	fs.StringVar(&f.zoomFile, "zoom-secret-file", "", "file holding the Zoom app's secret token (needed by --handshake zoom); an empty file removes it")
	cmd.MarkFlagsMutuallyExclusive("meta-verify-token", "meta-verify-token-file")
	if proxy {
		fs.StringVar(&f.inProxy, "handshakes-in-proxy", "", "in PROXY mode, who answers handshakes: LOCAL (the local process, default) or RELAY")
	}
}

// Input adds the flags given to in, as AnswerInput and HandshakesInput.
func (f *AnswerFlags) Input(cmd *cobra.Command, in map[string]any) error {
	fs := cmd.Flags()
	if fs.Changed("answer-status") || fs.Changed("answer-header") || fs.Changed("answer-body") {
		a := map[string]any{"status": 200}
		if fs.Changed("answer-status") {
			a["status"] = f.status
		}
		headers := []map[string]any{}
		for _, h := range f.headers {
			name, value, ok := strings.Cut(h, "=")
			if !ok || name == "" {
				return cmdutil.Usage(fmt.Errorf("--answer-header %q: want NAME=VALUE", h))
			}
			headers = append(headers, map[string]any{"name": name, "value": value})
		}
		a["headers"] = headers
		if fs.Changed("answer-body") {
			b, err := readAnswerBody(f.body)
			if err != nil {
				return err
			}
			a["bodyBase64"] = base64.StdEncoding.EncodeToString(b)
		}
		in["answer"] = a
	}
	h := map[string]any{}
	if fs.Changed("handshake") {
		names := []string{}
		for _, n := range f.handshakes {
			n = strings.ToUpper(strings.TrimSpace(n))
			switch n {
			case "NONE", "":
				continue
			case "SLACK", "META", "MSGRAPH", "DROPBOX", "ZOOM":
				names = append(names, n)
			default:
				return cmdutil.Usage(fmt.Errorf("--handshake %q: want slack, meta, msgraph, dropbox, zoom or none", strings.ToLower(n)))
			}
		}
		h["enabled"] = names
	}
	if fs.Changed("meta-verify-token") {
		h["metaVerifyToken"] = f.metaToken
	}
	if fs.Changed("meta-verify-token-file") {
		s, err := ReadSecretFile("--meta-verify-token-file", f.metaFile)
		if err != nil {
			return err
		}
		h["metaVerifyToken"] = s
	}
	if fs.Changed("zoom-secret-file") {
		s, err := ReadSecretFile("--zoom-secret-file", f.zoomFile)
		if err != nil {
			return err
		}
		h["zoomSecret"] = s
	}
	if fs.Changed("handshakes-in-proxy") {
		side := strings.ToUpper(f.inProxy)
		if side != "LOCAL" && side != "RELAY" {
			return cmdutil.Usage(fmt.Errorf("--handshakes-in-proxy %q: want LOCAL or RELAY", f.inProxy))
		}
		h["inProxy"] = side
	}
	if len(h) > 0 {
		in["handshakes"] = h
	}
	return nil
}

// maxSecretFile bounds what a secret file is read for; the relay takes a
// secret of at most 256 bytes and says so.
const maxSecretFile = 4 << 10

// ReadSecretFile reads a secret from a file (not the command line, which
// other users see in the process list), without its final newline and
// surrounding space. Errors name the flag and file, never the content.
func ReadSecretFile(flag, path string) (string, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", cmdutil.Usage(fmt.Errorf("%s: %w", flag, err))
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	if len(b) > maxSecretFile {
		return "", cmdutil.Usage(fmt.Errorf("%s %s: over %d bytes (the relay takes a secret of at most 256)", flag, path, maxSecretFile))
	}
	return strings.TrimSpace(string(b)), nil
}

func readAnswerBody(v string) ([]byte, error) {
	name, ok := strings.CutPrefix(v, "@")
	if !ok {
		return []byte(v), nil
	}
	var r io.Reader = os.Stdin
	if name != "-" {
		file, err := os.Open(name)
		if err != nil {
			return nil, cmdutil.Usage(fmt.Errorf("--answer-body: %w", err))
		}
		defer file.Close()
		r = file
	}
	b, err := io.ReadAll(io.LimitReader(r, maxAnswerFile+1))
	if err != nil {
		return nil, fmt.Errorf("--answer-body: %w", err)
	}
	if len(b) > maxAnswerFile {
		return nil, cmdutil.Usage(errors.New("--answer-body " + v + ": over 1 MiB (the relay takes at most 64 KiB)"))
	}
	return b, nil
}

// describeAnswer is one line naming what an address answers by itself
// (mode is an Endpoint's, "" for an inspector).
func describeAnswer(mode string, a *AnswerJSON, h *HandshakesJSON) string {
	if a == nil {
		return "-"
	}
	s := answerStatus(mode, a)
	if len(a.Headers) > 0 || a.Body != "" {
		s += fmt.Sprintf(" (%d headers, %d bytes)", len(a.Headers), len(a.Body))
	}
	if h != nil && len(h.Enabled) > 0 {
		s += ", handshakes " + strings.ToLower(strings.Join(h.Enabled, ","))
		if h.InProxy == "RELAY" {
			s += " (relay answers in PROXY mode)"
		}
	}
	return s
}

// answerStatus is the status an address answers by itself: a QUEUE
// Endpoint without an answer of its own (the default, 204 with no header
// and no body) answers 202 with {"queued":true,...}, not 204.
func answerStatus(mode string, a *AnswerJSON) string {
	if mode == "QUEUE" && a.Status == 204 && len(a.Headers) == 0 && a.Body == "" {
		return "202 (queued)"
	}
	return fmt.Sprint(a.Status)
}

// PrintAnswers writes the answer and handshakes of an address, as
// `endpoints show` and `inspector answer` print them (mode is an
// Endpoint's, "" for an inspector).
func PrintAnswers(w io.Writer, mode string, a *AnswerJSON, h *HandshakesJSON) {
	if a != nil {
		fmt.Fprintf(w, "answer:      %s\n", answerStatus(mode, a))
		for _, hd := range a.Headers {
			fmt.Fprintf(w, "  %s: %s\n", hd.Name, hd.Value)
		}
		if a.Body != "" {
			fmt.Fprintf(w, "  body: %d bytes\n", len(a.Body))
		}
	}
	if h == nil {
		return
	}
	enabled := "none"
	if len(h.Enabled) > 0 {
		enabled = strings.ToLower(strings.Join(h.Enabled, ", "))
	}
	fmt.Fprintf(w, "handshakes:  %s\n", enabled)
	if h.MetaVerifyTokenSet {
		fmt.Fprintln(w, "  meta verify token: set")
	}
	if h.ZoomSecretSet {
		fmt.Fprintln(w, "  zoom secret token: set")
	}
	if h.InProxy == "RELAY" {
		fmt.Fprintln(w, "  in PROXY mode: answered by the relay")
	}
}
