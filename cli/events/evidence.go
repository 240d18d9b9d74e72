package events

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/domain/duration"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/diskreserve"
	"github.com/relayhq/relay/logexport"
)

// logSource reads a chained log as an evidence.Source.
type logSource struct{ l logexport.Chained }

func (s logSource) Chain(ctx context.Context, after uint64, limit int) ([]evidence.ChainLink, error) {
	return s.l.ReadChain(ctx, after, limit)
}

func (s logSource) Events(ctx context.Context, after uint64, limit int) ([]evidence.Event, error) {
	return s.l.ReadStored(ctx, after, limit)
}

// verifyChain checks the chain and the checkpoints and prints what it
// found; it returns an error when something is wrong.
func verifyChain(ctx context.Context, src evidence.Source, opts evidence.Options, w io.Writer) error {
	r, err := evidence.Verify(ctx, src, opts)
	if err != nil {
		return err
	}
	if r.Head == 0 && r.Events > 0 {
		return errors.New("verify: this log has no hash chain (it was exported from a log that keeps none, or by an older relay)")
	}
	if err := printProblems(r, w); err != nil {
		return err
	}
	fmt.Fprintf(w, "ok: %s chained to position %d, head %s; %d removed by %s; %s",
		domain.Counted(r.Events, "event", "events"), r.Head, r.HeadLink, r.Removed, domain.Counted(r.Deletions, "stream deletion", "stream deletions"), checkpointsText(r.Checkpoints))
	printTail(r, len(opts.Kept), w)
	return nil
}

// verifyStreams is verifyChain for a log with a chain per stream
// (JetStream).
func verifyStreams(ctx context.Context, src evidence.MessageSource, opts evidence.Options, w io.Writer) error {
	r, err := evidence.VerifyStreams(ctx, src, opts)
	if err != nil {
		return err
	}
	if r.Head == 0 && r.Events > 0 {
		return errors.New("verify: this log has no hash chain (its events were written by an older relay)")
	}
	if err := printProblems(r, w); err != nil {
		return err
	}
	fmt.Fprintf(w, "ok: %s of %s chained, each stream to its head, up to position %d; %d removed by %s; %s",
		domain.Counted(r.Events, "event", "events"), domain.Counted(r.Streams, "stream", "streams"), r.Head, r.Removed, domain.Counted(r.Deletions, "stream deletion", "stream deletions"), checkpointsText(r.Checkpoints))
	if r.Unchained > 0 {
		fmt.Fprintf(w, " (%d messages older than the chain)", r.Unchained)
	}
	printTail(r, len(opts.Kept), w)
	return nil
}

func checkpointsText(n int64) string {
	if n == 0 {
		return "no checkpoint"
	}
	return domain.Counted(n, "checkpoint", "checkpoints")
}

// printProblems prints what Verify found, and an error when it found
// anything.
func printProblems(r evidence.Report, w io.Writer) error {
	for _, p := range r.Problems {
		where := fmt.Sprintf("position %d", p.Position)
		if p.Stream != "" {
			where += " stream " + p.Stream
		}
		if p.ID != "" {
			where += " id " + p.ID
		}
		fmt.Fprintf(w, "problem: %s: %s: %s\n", where, p.Kind, p.Detail)
	}
	if !r.OK() {
		first := r.Problems[0]
		return fmt.Errorf("verify: %d problems; the first at position %d: %s", len(r.Problems), first.Position, first.Kind)
	}
	return nil
}

// printTail ends the "ok" line and prints the decisions and the checkpoint
// to keep. kept is how many checkpoints kept from earlier were checked.
func printTail(r evidence.Report, kept int, w io.Writer) {
	if r.Unsigned > 0 {
		fmt.Fprintf(w, " (%d signatures not checked: no public key; give --pubkey)", r.Unsigned)
	}
	fmt.Fprintln(w)
	if r.Checkpoints == 0 && kept == 0 {
		// A hash chain proves each event follows the one before, never
		// that nothing came after: only a signed checkpoint kept outside
		// the log pins its end.
		fmt.Fprintln(w, "end unproven: the log holds no signed checkpoint and none kept from earlier was given (--checkpoint), "+
			"so events cut from its end, or a log rewritten whole, would pass; the relay signs one every --checkpoint-interval when the log moved")
	}
	// What decided the deletions: retention's own events.
	for _, d := range r.Decisions {
		if d.Endpoint != "" {
			count := fmt.Sprint(d.Deliveries)
			if d.AtLeast {
				count = "at least " + count
			}
			fmt.Fprintf(w, "retention decision at position %d (%s): endpoint %s, window %s, received before %s, %s deliveries deleted\n",
				d.Position, d.Type, d.Endpoint, duration.Format(time.Duration(d.RetentionMs)*time.Millisecond), d.Cutoff, count)
			continue
		}
		fmt.Fprintf(w, "retention decision at position %d (%s): inspector %s, %s deleted\n", d.Position, d.Type, d.Inspector, domain.Counted(d.Deliveries, "delivery", "deliveries"))
	}
	if more := r.DecisionsTotal - int64(len(r.Decisions)); more > 0 {
		fmt.Fprintf(w, "and %d more retention decisions\n", more)
	}
	if r.Last != nil {
		b, _ := json.Marshal(r.Last)
		fmt.Fprintf(w, "last checkpoint (keep it; verify --checkpoint checks a later log against it): %s\n", b)
	}
}

// publicKey is --pubkey, or the public half of the data folder's key.
func publicKey(flag, data string) (ed25519.PublicKey, error) {
	if flag != "" {
		return pubkeyFlag(flag)
	}
	if data == "" {
		return nil, nil
	}
	b, err := readSmallFile(filepath.Join(data, "checkpoint.key"), maxKeyFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	key, err := evidence.ParseKey(b)
	if err != nil {
		return nil, err
	}
	return key.Public().(ed25519.PublicKey), nil
}

// pubkeyFlag reads --pubkey: the key itself (ed25519:BASE64, as relay
// events pubkey prints it) or a file holding it (relay events pubkey >
// relay.pub).
func pubkeyFlag(flag string) (ed25519.PublicKey, error) {
	if strings.HasPrefix(strings.TrimSpace(flag), "ed25519:") {
		return evidence.ParsePublicKey(flag)
	}
	b, err := readSmallFile(flag, maxKeyFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, cmdutil.Usage(fmt.Errorf("--pubkey %q: neither a key (ed25519:BASE64) nor a file holding one (relay events pubkey > relay.pub writes it)", flag))
	}
	if err != nil {
		return nil, fmt.Errorf("--pubkey: %w", err)
	}
	return evidence.ParsePublicKey(string(b))
}

// maxKeyFile bounds a checkpoint key file: the relay writes one PEM block
// of an Ed25519 key in PKCS #8, 119 bytes.
const maxKeyFile = 64 << 10

// maxCheckpointFile bounds --checkpoint @FILE: one checkpoint a
// verification printed is under 400 bytes, so a few thousand kept ones.
const maxCheckpointFile = 1 << 20

// readSmallFile reads a file the command line names, refusing one over max
// bytes (a *evidence.LimitError) without reading more than max+1.
func readSmallFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, &evidence.LimitError{File: path, What: "the file", Limit: max}
	}
	return b, nil
}

// keptCheckpoints reads --checkpoint values: a checkpoint's JSON, or
// @FILE holding one per line (at most maxCheckpointFile bytes).
func keptCheckpoints(values []string) ([]evidence.Checkpoint, error) {
	var out []evidence.Checkpoint
	for _, v := range values {
		text := v
		if name, ok := strings.CutPrefix(v, "@"); ok {
			b, err := readSmallFile(name, maxCheckpointFile)
			if err != nil {
				return nil, fmt.Errorf("--checkpoint: %w", err)
			}
			text = string(b)
		}
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			var c evidence.Checkpoint
			if err := json.Unmarshal([]byte(line), &c); err != nil || c.Link == "" && c.Chain != evidence.HeadsChain {
				if len(line) > 200 {
					line = line[:200] + "…"
				}
				return nil, fmt.Errorf("--checkpoint %q: want the JSON a verification printed", line)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// verifyProofFile checks a proof file with a public key and prints what it
// proves. A file over the limits of a proof (evidence.MaxProofBytes, its
// events and path) is refused, exit 2, before it is decoded.
func verifyProofFile(path, pubkey string, w io.Writer) error {
	if pubkey == "" {
		return cmdutil.Usage(errors.New("--proof needs --pubkey: the relay's public key, from relay events pubkey"))
	}
	key, err := pubkeyFlag(pubkey)
	if err != nil {
		return cmdutil.Usage(err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() == 0 {
		// What relay events prove ... > FILE leaves when prove refused: a
		// command line to run again later (exit 2), not a proof found wrong.
		return cmdutil.Usage(fmt.Errorf("--proof %s is empty: relay events prove writes a proof only once a checkpoint signs the delivery (every --checkpoint-interval, and at shutdown); run it again then", path))
	}
	p, sp, err := evidence.ReadProof(path)
	switch {
	case evidence.IsLimit(err):
		return cmdutil.Usage(fmt.Errorf("--proof %w", err))
	case errors.Is(err, os.ErrNotExist):
		return cmdutil.Usage(fmt.Errorf("--proof: %w", err))
	case err != nil:
		return fmt.Errorf("--proof %w", err)
	case sp != nil:
		return verifyStreamProof(*sp, key, w)
	}
	if err := evidence.VerifyProof(*p, key); err != nil {
		return fmt.Errorf("verify --proof: %w", err)
	}
	fmt.Fprintf(w, "ok: %s of %s are in the log the relay signed at position %d (a tree of %d leaves, root %s)\n",
		domain.Counted(len(p.Events), "event", "events"), p.Events[0].Stream, p.Checkpoint.Position, p.Checkpoint.TreeSize, p.Checkpoint.Root)
	for _, e := range p.Events {
		var md domain.Metadata
		_ = json.Unmarshal(e.Metadata, &md)
		fmt.Fprintf(w, "  position %d  %s  %s\n", e.Position, md.OccurredAt, e.Type)
	}
	return nil
}

// verifyStreamProof checks a proof of one stream of a log with a chain per
// stream and prints what it proves.
func verifyStreamProof(p evidence.StreamProof, key ed25519.PublicKey, w io.Writer) error {
	if err := evidence.VerifyStreamProof(p, key); err != nil {
		return fmt.Errorf("verify --proof: %w", err)
	}
	fmt.Fprintf(w, "ok: %s of %s, revisions %d to %d, are its chain up to its head in the log the relay signed at position %d (%d stream heads, root %s)\n",
		domain.Counted(len(p.Events), "event", "events"), p.Stream, p.Events[0].Revision, p.Events[len(p.Events)-1].Revision, p.Checkpoint.Position, p.Checkpoint.TreeSize, p.Checkpoint.Root)
	for _, e := range p.Events {
		var md domain.Metadata
		_ = json.Unmarshal(e.Metadata, &md)
		fmt.Fprintf(w, "  position %d  %s  %s\n", e.Position, md.OccurredAt, e.Type)
	}
	return nil
}

// downloadExport saves a running relay's /log/export in a temporary file
// (the verifier reads it twice over, and a log may not fit in memory) and
// returns its name.
func downloadExport(ctx context.Context, server, adminToken string, stderr io.Writer) (string, error) {
	if adminToken == "" {
		return "", cmdutil.Usage(errors.New("--server needs the relay's --admin-token (--admin-token or RELAY_ADMIN_TOKEN)"))
	}
	base, err := cmdutil.NormalServer(server)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/log/export", nil)
	if err != nil {
		return "", cmdutil.Usage(fmt.Errorf("--server: %w", err))
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	// No overall timeout: the log is as long as it is. The answer must
	// start in time.
	hc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 30 * time.Second}}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("download the log: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		return "", cmdutil.Usage(fmt.Errorf("%s refused the admin token", base))
	case http.StatusNotFound:
		return "", fmt.Errorf("%s serves no log export (it runs without --admin-token, or is older)", base)
	default:
		return "", fmt.Errorf("download the log: %s answered %s", base, resp.Status)
	}
	f, err := os.CreateTemp("", "relay-log-*.jsonl")
	if err != nil {
		return "", err
	}
	x := &exportWriter{w: f, name: base + "/log/export", dir: filepath.Dir(f.Name()), space: downloadSpace(filepath.Dir(f.Name()))}
	n, err := io.Copy(x, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		if evidence.IsLimit(err) {
			return "", err // refused as a file given over the limit is: exit 2
		}
		return "", fmt.Errorf("download the log (after %d bytes): %w", n, err)
	}
	fmt.Fprintf(stderr, "downloaded the log of %s (%d bytes)\n", base, n)
	return f.Name(), nil
}

// downloadReserve is the free space a download of the log leaves on the
// file system it is kept in: relay serve's default reserve (--min-free-disk).
var downloadReserve = diskreserve.DefaultLimit

// downloadSpaceEvery is how often (in bytes written) a download reads the
// free space left: it passes the reserve by at most this much.
const downloadSpaceEvery = 16 << 20

// downloadSpace tells how much room the folder a download is kept in has
// (a test's own in tests).
var downloadSpace = func(dir string) diskreserve.Source { return diskreserve.Statfs{Dir: dir} }

// exportWriter keeps a downloaded export within what an export is and what
// the disk can spare, as it arrives: a line longer than any relay writes
// (evidence.MaxExportLine) is refused at its first byte past the bound,
// where the whole answer was saved before the verifier refused it (a relay
// that sent one endless line filled the disk); and the download stops
// before the folder it is kept in has less than downloadReserve free (a
// relay that sends lines without end, each within the bound).
type exportWriter struct {
	w       io.Writer
	name    string // the export's URL, for errors
	dir     string
	space   diskreserve.Source
	lines   int   // lines ended so far
	run     int64 // bytes of the line being written
	written int64
	checked int64 // written when the free space was last read
	looked  bool
}

func (x *exportWriter) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest)
		}
		if x.run+int64(i) > evidence.MaxExportLine {
			return 0, &evidence.LimitError{File: x.name, Line: x.lines + 1, What: "an export line", Limit: evidence.MaxExportLine}
		}
		if i == len(rest) {
			x.run += int64(i)
			break
		}
		x.run = 0
		x.lines++
		rest = rest[i+1:]
	}
	if !x.looked || x.written+int64(len(p))-x.checked > downloadSpaceEvery {
		x.looked, x.checked = true, x.written
		// A file system whose free space cannot be read is not checked.
		if sp, err := x.space.Space(); err == nil {
			if reserve := downloadReserve.Of(sp.Total); sp.Free < reserve+downloadSpaceEvery+uint64(len(p)) {
				return 0, fmt.Errorf("%s would have less than %s free (relay serve's default reserve): run relay events export on the relay's host and verify its file instead",
					x.dir, humanize.IBytes(reserve))
			}
		}
	}
	n, err := x.w.Write(p)
	x.written += int64(n)
	return n, err
}
