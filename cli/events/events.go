// Package events is `relay events`: the operator's commands on the event
// log and its evidence (package evidence) — export, verify, rebuild, prove.
package events

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/logexport"
)

// Command is `relay events`: export, verify and rebuild from the event log,
// and prove or check one delivery's record (docs/evidence.md).
func Command(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var data, eventstoreURL string
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Export, verify or rebuild from the event log (for auditors and operators)",
		Example: `  relay events export --data ./relay-data > events.jsonl
  relay events verify --data ./relay-data`,
	}
	cmd.PersistentFlags().StringVar(&data, "data", "./relay-data", "the relay's data folder")
	cmd.PersistentFlags().StringVar(&eventstoreURL, "eventstore", "", "event log: nats://host:4222 (JetStream; comma-separated cluster seeds), esdb://host:2113?tls=false (EventStoreDB); empty: the embedded log under --data")
	pre := func(c *cobra.Command, _ []string) error { return cmdutil.BindEnv(c.Flags(), env) }

	var outPath string
	export := &cobra.Command{
		Use:   "export",
		Short: "Write every event, in order, as JSON lines",
		Example: "  relay events export --data ./relay-data > events.jsonl\n" +
			"  relay events export --data ./relay-data -o events.jsonl",
		Args:    cobra.NoArgs,
		PreRunE: pre,
		RunE: func(c *cobra.Command, _ []string) error {
			if outPath == "json" || outPath == "text" {
				return cmdutil.Usage(fmt.Errorf("-o %q: events export writes JSON lines; its -o names the file to write (-o events.jsonl; ./%s for a file named %s)", outPath, outPath, outPath))
			}
			return withStore(c.Context(), data, eventstoreURL, func(s domain.EventStore) error {
				w, commit, abort, err := cmdutil.ExportOut(outPath, stdout)
				if err != nil {
					return err
				}
				defer abort()
				if err := logexport.Write(c.Context(), s, w); err != nil {
					return err
				}
				return commit()
			})
		},
	}
	export.Flags().StringVarP(&outPath, "out", "o", "", "write to this file (written whole or not at all) instead of stdout")
	var pubkey, proofFile, server, adminToken string
	var kept []string
	verify := &cobra.Command{
		Use:   "verify [EXPORT-FILE]",
		Short: "Check the log's hash chain and signed checkpoints, positions, stream revisions and that every event decodes",
		Long: `Check the log: every event against its leaf in the hash chain, every link against the one
before it, every checkpoint's signature and link, each stream's revisions, and that every
event decodes. The first bad event is named (position, stream, id, what is wrong); the exit
status is 1 when anything is wrong. Without EXPORT-FILE it reads the data folder (a running
relay's too); with one, the export alone, offline, with --pubkey. With --server it
downloads a running relay's log (its --admin-token is required) and checks that. With
--eventstore nats://… (JetStream) or esdb://… (EventStoreDB) it reads a log that keeps a
chain per stream and signs every stream's head. With --proof it checks a proof that relay events prove wrote, with
--pubkey alone.`,
		Example: `  relay events verify --data ./relay-data
  relay events verify events.jsonl --pubkey ed25519:... --checkpoint @kept.json
  relay events verify --eventstore nats://127.0.0.1:4222 --pubkey ed25519:...
  RELAY_ADMIN_TOKEN=... relay events verify --server https://relay.example.com --pubkey ed25519:...
  relay events verify --proof delivery.proof.json --pubkey ed25519:...`,
		Args: cobra.MaximumNArgs(1),
		PreRunE: func(c *cobra.Command, args []string) error {
			// --server only from the command line: RELAY_SERVER names the
			// relay of client commands, and must not turn a verification
			// of --data into one of a server.
			serverFlag := c.Flags().Changed("server")
			err := pre(c, args)
			if !serverFlag {
				server = ""
			}
			return err
		},
		RunE: func(c *cobra.Command, args []string) error {
			if proofFile != "" {
				if len(args) > 0 || len(kept) > 0 {
					return cmdutil.Usage(errors.New("--proof is checked alone: give no export file and no --checkpoint"))
				}
				return verifyProofFile(proofFile, pubkey, stdout)
			}
			checkpoints, err := keptCheckpoints(kept)
			if err != nil {
				return cmdutil.Usage(err)
			}
			if server != "" {
				if len(args) > 0 {
					return cmdutil.Usage(errors.New("give --server or an export file, not both"))
				}
				file, err := downloadExport(c.Context(), server, adminToken, stderr)
				if evidence.IsLimit(err) {
					return cmdutil.Usage(fmt.Errorf("verify: %w", err))
				}
				if err != nil {
					return err
				}
				defer os.Remove(file)
				args = []string{file}
			}
			if len(args) == 1 {
				key, err := publicKey(pubkey, "")
				if err != nil {
					return cmdutil.Usage(err)
				}
				// A line over the limits of an export (evidence.MaxExportLine)
				// is refused, exit 2, naming the file and the line.
				err = verifyExport(c.Context(), args[0], evidence.Options{PublicKey: key, Kept: checkpoints}, stdout)
				if evidence.IsLimit(err) {
					return cmdutil.Usage(fmt.Errorf("verify: %w", err))
				}
				return err
			}
			key, err := publicKey(pubkey, data)
			if err != nil {
				return cmdutil.Usage(err)
			}
			return withStore(c.Context(), data, eventstoreURL, func(s domain.EventStore) error {
				// The chain first: it names the first bad event and what is
				// wrong with it; the structural checks follow either way.
				var chainErr error
				if l, ok := s.(logexport.Chained); ok {
					chainErr = verifyChain(c.Context(), logSource{l}, evidence.Options{PublicKey: key, Kept: checkpoints}, stdout)
				} else if l, ok := s.(evidence.MessageSource); ok {
					chainErr = verifyStreams(c.Context(), l, evidence.Options{PublicKey: key, Kept: checkpoints}, stdout)
				} else {
					fmt.Fprintln(stdout, "this log keeps no hash chain: only positions, revisions and payloads are checked")
				}
				return errors.Join(chainErr, verifyEvents(c.Context(), s, stdout))
			})
		},
	}
	verify.Flags().StringVar(&pubkey, "pubkey", "", "the relay's checkpoint public key (ed25519:..., as relay events pubkey prints it) or a file holding it; default: the data folder's")
	verify.Flags().StringVar(&server, "server", "", "a running relay's URL: verify the log it serves at /log/export")
	verify.Flags().StringVar(&adminToken, "admin-token", "", "the running relay's --admin-token (with --server)")
	verify.Flags().StringVar(&proofFile, "proof", "", "a proof file (relay events prove) to check against --pubkey instead of a log")
	verify.Flags().StringArrayVar(&kept, "checkpoint", nil, "a checkpoint kept from an earlier verification (its JSON, or @FILE): the log must still hold what it signs")
	keyFile := ""
	pub := &cobra.Command{
		Use:     "pubkey",
		Short:   "Print the public key that verifies the relay's signed checkpoints",
		Example: "  relay events pubkey --data ./relay-data",
		Args:    cobra.NoArgs,
		PreRunE: pre,
		RunE: func(c *cobra.Command, _ []string) error {
			path := keyFile
			if path == "" {
				path = filepath.Join(data, "checkpoint.key")
			}
			b, err := readSmallFile(path, maxKeyFile)
			if evidence.IsLimit(err) {
				return cmdutil.Usage(fmt.Errorf("read checkpoint key: %w", err))
			}
			if err != nil {
				return fmt.Errorf("read checkpoint key (created by relay serve at first start): %w", err)
			}
			key, err := evidence.ParseKey(b)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, evidence.FormatPublicKey(key.Public().(ed25519.PublicKey)))
			return nil
		},
	}
	pub.Flags().StringVar(&keyFile, "checkpoint-key", "", "the key file; default DATA/checkpoint.key")
	rebuild := &cobra.Command{
		Use:     "rebuild",
		Short:   "Recreate the views file from the log, whatever state it is in (refused while a server uses --data)",
		Example: "  relay events rebuild --data ./relay-data",
		Args:    cobra.NoArgs,
		PreRunE: pre,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := logExists(data, eventstoreURL); err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			start := time.Now()
			// The views file is removed, not opened: a damaged one need not
			// be readable. app.New applies the whole log before it returns.
			a, err := app.New(c.Context(), app.Config{Data: data, EventStore: eventstoreURL, Logger: log, FreshViews: true, NoSweeps: true})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "rebuilt views from %d events in %s\n", a.Views().Position(), time.Since(start).Round(time.Millisecond))
			return a.Close()
		},
	}
	prove := &cobra.Command{
		Use:   "prove DELIVERY_ID",
		Short: "Write a proof that one delivery's events are in the log the relay signed, for a third party",
		Long: `Write a proof (JSON) that one delivery's events are in the log: the events as stored, the
newest signed checkpoint, and for each event the hashes that lead from it to the
checkpoint's Merkle root (about log2 of the log's size). On a log with a chain per stream
(--eventstore nats://… or esdb://…) the proof holds the delivery's events with their chain links and
the hashes that lead from the delivery's head to the checkpoint's tree of stream heads
(about log2 of the number of streams); writing it reads the whole log. Anyone with the
relay's public key checks it with relay events verify --proof, without the log. A delivery
newer than the last checkpoint cannot be proved until the next one (--checkpoint-interval).`,
		Example: `  relay events prove 0193a7c2-... --data ./relay-data > delivery.proof.json
  relay events prove 0193a7c2-... --eventstore nats://127.0.0.1:4222 > delivery.proof.json
  relay events verify --proof delivery.proof.json --pubkey "$(relay events pubkey)"`,
		Args:    cmdutil.UsageArgs(cobra.ExactArgs(1)),
		PreRunE: pre,
		RunE: func(c *cobra.Command, args []string) error {
			return withStore(c.Context(), data, eventstoreURL, func(s domain.EventStore) error {
				var p any
				var err error
				switch l := s.(type) {
				case provableLog:
					p, err = proveDelivery(c.Context(), l, args[0])
				case provableStreams:
					p, err = proveStreamDelivery(c.Context(), l, args[0])
				default:
					err = errors.New("prove: this log keeps no hash chain")
				}
				if err != nil {
					return err
				}
				b, err := json.MarshalIndent(p, "", "  ")
				if err != nil {
					return err
				}
				// Never write a proof that verify --proof would refuse.
				if len(b) > evidence.MaxProofBytes {
					return fmt.Errorf("prove: the proof of %s would be %d bytes, over the %d bytes a proof may be (its events carry large bodies); export the log instead",
						args[0], len(b), evidence.MaxProofBytes)
				}
				_, err = stdout.Write(append(b, '\n'))
				return err
			})
		},
	}
	cmd.AddCommand(export, verify, prove, pub, rebuild)
	return cmd
}

// verifyExport verifies an export file, of a log with one chain or with a
// chain per stream.
func verifyExport(ctx context.Context, path string, opts evidence.Options, w io.Writer) error {
	// A folder is a command line to correct too: most likely the data
	// folder, which --data names.
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return cmdutil.Usage(fmt.Errorf("%s is a folder, not an export file: give the file relay events export wrote, or --data %s if it is the folder relay serve keeps its data in", path, path))
	}
	perStream, err := evidence.IsStreamExport(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A file name mistyped is a command line to correct (exit 2), not a
		// log found wrong (exit 1).
		return cmdutil.Usage(fmt.Errorf("no export file %s: give the file relay events export wrote, or --data the folder relay serve keeps its data in", path))
	}
	// So is an empty file (of no bytes or only blank lines): no export has
	// no lines, and "ok: 0 events" would pass it as a verified log.
	if blank(path) {
		return cmdutil.Usage(fmt.Errorf("%s is empty: an export of the event log has a line per event; relay events export --data DIR -o events.jsonl writes one", path))
	}
	// So is a file of the other exports (relay deliveries export).
	if kind := otherExport(path); kind != "" {
		return cmdutil.Usage(fmt.Errorf("%s is %s, not an export of the event log: give the file relay events export wrote (relay events export --data DIR -o events.jsonl)", path, kind))
	}
	if err != nil {
		return err
	}
	if perStream {
		x, err := evidence.OpenStreamExport(path)
		if err != nil {
			return err
		}
		defer x.Close()
		return verifyStreams(ctx, x, opts, w)
	}
	x, err := evidence.OpenExport(path)
	if err != nil {
		return err
	}
	defer x.Close()
	return verifyChain(ctx, x, opts, w)
}

// blank reports whether the file at path holds only white space (or
// nothing). It reads up to the first other byte, and at most an export
// line's bound and a byte: past that much white space the file is not
// called empty, and the export reader refuses its first line as over the
// bound, where the whole file was read, whatever its size.
func blank(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	r := bufio.NewReader(io.LimitReader(f, evidence.MaxExportLine+1))
	for read := 0; ; read++ {
		b, err := r.ReadByte()
		if err != nil {
			return errors.Is(err, io.EOF) && read <= evidence.MaxExportLine
		}
		switch b {
		case ' ', '\t', '\r', '\n':
		default:
			return false
		}
	}
}

// otherExport names what relay deliveries export writes when path begins
// as one of those files does: "a HAR file" (its first key "log"), "a
// replay bundle" (its first key "relay_bundle"); else "".
func otherExport(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	d := json.NewDecoder(io.LimitReader(f, 4<<10))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	switch t, _ := d.Token(); t {
	case "log":
		return "a HAR file"
	case "relay_bundle":
		return "a replay bundle"
	}
	return ""
}

func withStore(ctx context.Context, data, eventstoreURL string, fn func(domain.EventStore) error) error {
	if err := logExists(data, eventstoreURL); err != nil {
		return err
	}
	s, err := app.OpenStore(ctx, data, eventstoreURL, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	return cmdutil.JoinClose(fn(s), s.Close())
}

// logExists refuses (exit 2) a --data folder that holds no embedded log,
// before anything opens it: opening would create an empty log there (in
// an existing folder: verify said "ok: 0 events", rebuild rebuilt
// nothing) or fail with SQLite's "unable to open database file (14)".
// With --eventstore the log is elsewhere and not checked here.
func logExists(data, eventstoreURL string) error {
	if eventstoreURL != "" {
		return nil
	}
	path := filepath.Join(data, "events.db")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return cmdutil.Usage(fmt.Errorf("no event log in %s (no %s): give --data the folder relay serve keeps its data in (its --data; ./relay-data of the folder it was started in by default)", data, path))
	} else if err != nil {
		return fmt.Errorf("event log: %w", err)
	}
	return nil
}

// verifyEvents checks what auditors rely on: positions strictly increase,
// each stream's revisions run 0, 1, 2… without gaps, and every payload decodes.
// A deleted stream holds only its tombstone, at revision 0 (see
// docs/retention.md); positions have gaps where its events were.
func verifyEvents(ctx context.Context, s domain.EventStore, w io.Writer) error {
	codec := domain.NewCodec()
	// Each stream's revisions are checked by the log itself where it can
	// (the embedded one, over its index, in bounded memory); else here,
	// with a counter per stream.
	rc, byLog := s.(revisionChecker)
	next := map[string]uint64{}
	var last uint64
	var n, deleted int
	var problems []string
	add := func(p string) {
		if len(problems) < maxListedProblems {
			problems = append(problems, p)
		}
	}
	err := logexport.Each(ctx, s, func(e domain.RecordedEvent) error {
		n++
		if e.Position <= last {
			add(fmt.Sprintf("position %d after %d", e.Position, last))
		}
		last = e.Position
		if !byLog {
			if want := next[e.Stream]; e.Revision != want {
				add(fmt.Sprintf("%s: revision %d where %d was expected (position %d)", e.Stream, e.Revision, want, e.Position))
			}
			next[e.Stream] = e.Revision + 1
		}
		if e.Type == domain.TypeStreamDeleted {
			deleted++
		}
		if _, err := codec.Decode(e.Type, e.Data); err != nil {
			add(fmt.Sprintf("position %d: %v", e.Position, err))
		}
		return nil
	})
	if err != nil {
		return err
	}
	streams := int64(len(next))
	if byLog {
		var bad []string
		if streams, bad, err = rc.CheckRevisions(ctx, maxListedProblems); err != nil {
			return err
		}
		for _, b := range bad {
			add(b)
		}
	}
	for _, p := range problems {
		fmt.Fprintln(w, "problem:", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("verify: %d problems in %d events", len(problems), n)
	}
	fmt.Fprintf(w, "ok: %s in %s (%d deleted), last position %d\n", domain.Counted(n, "event", "events"), domain.Counted(streams, "stream", "streams"), deleted, last)
	return nil
}

// maxListedProblems bounds the problems verify lists.
const maxListedProblems = 100

// revisionChecker is a log that checks its streams' revisions itself.
type revisionChecker interface {
	CheckRevisions(ctx context.Context, limit int) (streams int64, problems []string, err error)
}
