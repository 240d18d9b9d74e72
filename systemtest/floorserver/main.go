// Command floorserver is the least a program can do and still do what the
// relay's hot paths must: take a webhook through Echo, append it to a SQLite
// file through the same pure-Go driver with a durable, group-committed
// commit before answering, and keep a SQLite history view of it. In proxy
// mode it also carries each request over one WebSocket to an agent process
// that calls the local handler, and records the answer the same way before
// passing it back.
//
// It is not part of the relay. BenchmarkFloor runs it beside the bare
// server to show the ceiling of that stack on the machine at hand: what it
// leaves out (event JSON and envelopes, idempotency and revision checks,
// header order, GraphQL on the agent's WebSocket, checkpoints, metrics)
// makes it cheaper than any relay, so its rate bounds the relay's from
// above. docs/benchmarks.md has the figures.
//
//	floorserver -mode inspector -data DIR      # prints its address, answers 204
//	floorserver -mode inspector -storage relay -data DIR  # stores what the relay must (storage.go)
//	floorserver -mode proxy -data DIR          # agents dial ws://ADDR/agent
//	floorserver -mode agent -relay ADDR -target HOST:PORT
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"

	"github.com/labstack/echo/v4"
	_ "modernc.org/sqlite"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/internal/groupcommit"
	"github.com/relayhq/relay/internal/sqlitedsn"
)

// captureLimit is the relay's default capture cap.
const captureLimit = 256 << 10

func main() {
	mode := flag.String("mode", "inspector", "inspector, proxy or agent")
	data := flag.String("data", "", "folder for the log and the view (inspector, proxy)")
	relay := flag.String("relay", "", "host:port of a proxy-mode floorserver (agent)")
	target := flag.String("target", "", "host:port of the local handler (agent)")
	storage := flag.String("storage", "least", "least, or relay: the relay's log and history indexes (storage.go)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the server's life to this file")
	traceOut := flag.String("trace", "", "write an execution trace of the server's life to this file")
	drop := flag.String("drop", "", "with -storage relay, parts of it to leave out, comma-separated (storage.go: "+strings.Join(dropParts, ", ")+")")
	flag.Parse()

	if *storage != "least" && *storage != "relay" {
		log.Fatalf("-storage %q: want least or relay", *storage)
	}
	dropped, err := parseDrops(*drop)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *mode == "agent" {
		cmdutil.OneProc(os.Getenv) // as relay agent runs
		agent := func() error { return runAgent(ctx, *relay, *target) }
		if err := recording(*traceOut, trace.Start, trace.Stop, agent); err != nil {
			log.Fatal(err)
		}
		return
	}
	run := func() error { return serve(ctx, *mode, *data, *storage == "relay", dropped) }
	traced := func() error { return recording(*traceOut, trace.Start, trace.Stop, run) }
	if err := recording(*cpuprofile, pprof.StartCPUProfile, pprof.StopCPUProfile, traced); err != nil {
		log.Fatal(err)
	}
}

// recording runs fn while start records to the file at path (a CPU
// profile, an execution trace), stopped by stop; without a path it only
// runs fn.
func recording(path string, start func(io.Writer) error, stop func(), fn func() error) error {
	if path == "" {
		return fn()
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := start(f); err != nil {
		return errors.Join(err, f.Close())
	}
	err = fn()
	stop()
	return errors.Join(err, f.Close())
}

func serve(ctx context.Context, mode, data string, relayStorage bool, dropped drops) error {
	if data == "" {
		return fmt.Errorf("-data is required")
	}
	open := openLog
	if relayStorage {
		open = func(ctx context.Context, dir string) (*eventLog, error) { return openRelayLog(ctx, dir, dropped) }
	}
	lg, err := open(ctx, data)
	if err != nil {
		return err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	switch mode {
	case "inspector":
		e.Any("/*", func(c echo.Context) error {
			rec, err := capture(c)
			if err != nil {
				return err
			}
			rec.status = 204 // answered at receipt
			if err := <-lg.append(rec); err != nil {
				return err
			}
			return c.NoContent(204)
		})
	case "proxy":
		t := newTunnel()
		t.oneRecord = relayStorage
		e.GET("/agent", t.accept)
		e.GET("/floor/stages", t.stages.serve)
		e.Any("/*", func(c echo.Context) error { return t.proxy(c, lg) })
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	e.Listener = ln
	fmt.Println(ln.Addr().String()) // the benchmark reads the address from here
	go func() {
		<-ctx.Done()
		_ = e.Close()
	}()
	if err := e.Start(""); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// record is one row of the log: a request as received, or an answer.
type record struct {
	kind, address  string
	method, target string
	headers, body  []byte
	status         int
	answer         []byte // the answer's body, recorded with the request (-storage relay, proxy)
	done           chan error
	// With -storage relay (storage.go): the event's ID, stream, revision
	// and time, its position once the writer has placed it, and its size
	// as stored.
	id, stream string
	rev        int
	at         int64
	pos        uint64
	stored     int
}

// capture reads what the relay would record of a request: method, raw
// target, headers and the body up to the capture cap.
func capture(c echo.Context) (*record, error) {
	r := c.Request()
	body, err := io.ReadAll(io.LimitReader(r.Body, captureLimit))
	if err != nil {
		return nil, err
	}
	var headers []byte
	for name, values := range r.Header {
		for _, v := range values {
			headers = append(headers, name...)
			headers = append(headers, ": "...)
			headers = append(headers, v...)
			headers = append(headers, '\n')
		}
	}
	return &record{kind: "received", address: r.Host, method: r.Method, target: r.RequestURI, headers: headers, body: body}, nil
}

// eventLog group-commits records: one writer goroutine takes every record
// waiting, inserts them in one transaction and commits it with one fsync
// (synchronous=FULL), then hands the batch to the view.
type eventLog struct {
	queue chan *record
	view  chan []*record
	named bool // each record is given a delivery's ID and stream (storage.go)
}

func openLog(ctx context.Context, dir string) (*eventLog, error) {
	logDB, err := openDB(ctx, filepath.Join(dir, "log.db"), sqlitedsn.Full,
		`CREATE TABLE IF NOT EXISTS events(position INTEGER PRIMARY KEY, kind TEXT, address TEXT, method TEXT, target TEXT, headers BLOB, body BLOB)`)
	if err != nil {
		return nil, err
	}
	viewDB, err := openDB(ctx, filepath.Join(dir, "view.db"), sqlitedsn.Normal,
		`CREATE TABLE IF NOT EXISTS history(position INTEGER PRIMARY KEY, kind TEXT, address TEXT, method TEXT, target TEXT, size INTEGER);
		 CREATE INDEX IF NOT EXISTS history_by_address ON history(address, position)`)
	if err != nil {
		return nil, err
	}
	stmt, err := viewDB.PrepareContext(ctx, `INSERT INTO history(kind, address, method, target, size) VALUES(?, ?, ?, ?, ?)`)
	if err != nil {
		return nil, err
	}
	l := &eventLog{queue: make(chan *record, 4096), view: make(chan []*record, 64)}
	go l.write(ctx, logDB, `INSERT INTO events(kind, address, method, target, headers, body) VALUES(?, ?, ?, ?, ?, ?)`, func(r *record) []any {
		return []any{r.kind, r.address, r.method, r.target, r.headers, r.body}
	})
	go l.project(ctx, func(batch []*record) error {
		return inTx(ctx, viewDB, stmt, batch, func(r *record) []any {
			return []any{r.kind, r.address, r.method, r.target, len(r.body)}
		})
	})
	return l, nil
}

func openDB(ctx context.Context, path string, sync sqlitedsn.Sync, schema string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", sqlitedsn.Build(path, false, sync))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return db, nil
}

// append queues r and returns where its commit's result arrives.
func (l *eventLog) append(r *record) <-chan error {
	r.done = make(chan error, 1)
	if l.named {
		newDelivery(r)
	}
	l.queue <- r
	return r.done
}

func (l *eventLog) write(ctx context.Context, db *sql.DB, insert string, row func(*record) []any) {
	stmt, err := db.PrepareContext(ctx, insert)
	if err != nil {
		log.Fatal(err)
	}
	var last uint64 // a fresh log; positions are given in order
	// The relay's log waits for company before a commit under many
	// senders; the floor's does the same (groupcommit).
	linger := groupcommit.Linger[*record]{Wait: groupcommit.DefaultWait}
	for {
		var batch []*record
		select {
		case <-ctx.Done():
			return
		case r := <-l.queue:
			batch = append(batch, r)
		}
	more:
		for len(batch) < 512 {
			select {
			case r := <-l.queue:
				batch = append(batch, r)
			default:
				break more
			}
		}
		batch = linger.Gather(l.queue, batch, 512)
		for _, r := range batch {
			last++
			r.pos = last
		}
		err := inTx(ctx, db, stmt, batch, row)
		for _, r := range batch {
			r.done <- err
		}
		if err == nil {
			l.view <- batch
		}
	}
}

// project applies each committed batch to the view with apply.
func (l *eventLog) project(ctx context.Context, apply func([]*record) error) {
	for {
		select {
		case <-ctx.Done():
			return
		case batch := <-l.view:
			if err := apply(batch); err != nil {
				log.Fatal(err)
			}
		}
	}
}

// inTx inserts one row per record in one transaction. The context is
// never cancellable: the driver would watch a cancellable one with a
// goroutine per statement, which the relay avoids on its hot paths too.
func inTx(ctx context.Context, db *sql.DB, stmt *sql.Stmt, batch []*record, row func(*record) []any) error {
	ctx = context.WithoutCancel(ctx)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	st := tx.StmtContext(ctx, stmt)
	for _, r := range batch {
		if _, err := st.ExecContext(ctx, row(r)...); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}
