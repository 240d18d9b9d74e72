package main

import (
	"fmt"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"
)

// byteSize is a flag that accepts sizes such as "256KiB" or "10MiB".
type byteSize int64

func (b *byteSize) String() string { return humanize.IBytes(uint64(*b)) }
func (b *byteSize) Type() string   { return "size" }
func (b *byteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("not a size (try 256KiB or 10MiB): %w", err)
	}
	if n == 0 || n > 1<<40 {
		return fmt.Errorf("size %s out of range", s)
	}
	*b = byteSize(n)
	return nil
}

// serveConfig is everything `relay serve` is told.
type serveConfig struct {
	Listen         string
	Domain         string
	Data           string
	EventStore     string
	InspectorTTL   time.Duration
	CaptureCap     byteSize
	MaxBody        byteSize
	ForwardTimeout time.Duration
	Signup         bool
	AdminToken     string
	LogLevel       string
	PublicPort     int
	ShutdownGrace  time.Duration
	KeepAlive      time.Duration
	// WebSocket bounds (see docs/security.md, "WebSocket subscriptions").
	MaxWSMessage       byteSize
	MaxWSSubscriptions int
	MaxWSPerIP         int
	CPUProfile         string
	Trace              string
}

func (c *serveConfig) flags(fs *pflag.FlagSet) {
	c.CaptureCap = 256 << 10
	c.MaxBody = 10 << 20
	c.MaxWSMessage = 1 << 20
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&c.Domain, "domain", "localhost", "public domain; addresses are <id>.<domain>, the console is on the bare domain")
	fs.StringVar(&c.Data, "data", "./relay-data", "folder for the event log and the views")
	fs.StringVar(&c.EventStore, "eventstore", "", "EventStoreDB connection string (esdb://host:2113?tls=false); empty: the embedded log under --data")
	fs.DurationVar(&c.InspectorTTL, "inspector-ttl", 24*time.Hour, "a guest inspector expires after this long without a request")
	fs.Var(&c.CaptureCap, "capture-cap", "bytes of each request body stored; larger bodies are marked incomplete")
	fs.Var(&c.MaxBody, "max-body", "largest body forwarded in proxy mode (413 beyond)")
	fs.DurationVar(&c.ForwardTimeout, "forward-timeout", 30*time.Second, "how long a forward may take before the sender gets 504")
	fs.BoolVar(&c.Signup, "signup", true, "allow anyone to sign up (false: tokens come from `relay accounts create`)")
	fs.StringVar(&c.AdminToken, "admin-token", "", "token that reads the whole event log through the events query (operators and auditors)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error (debug logs one line per delivery)")
	fs.IntVar(&c.PublicPort, "public-port", 0, "port in public URLs when a proxy in front listens elsewhere (default: the listen port)")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", 30*time.Second, "how long SIGTERM waits for in-flight requests")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (for performance work)")
	_ = fs.MarkHidden("cpuprofile")
	fs.StringVar(&c.Trace, "trace", "", "write an execution trace of the whole run to this file (for latency work)")
	_ = fs.MarkHidden("trace")
	fs.DurationVar(&c.KeepAlive, "keepalive", 5*time.Second, "WebSocket ping interval; a silent client is dropped after twice this")
	fs.Var(&c.MaxWSMessage, "max-ws-message", "largest WebSocket message a client may send (closed 1009 beyond); an authenticated socket may also send an agent's answer of --max-body")
	fs.IntVar(&c.MaxWSSubscriptions, "max-ws-subscriptions", 100, "operations one WebSocket may run at once (TOO_MANY_SUBSCRIPTIONS beyond)")
	fs.IntVar(&c.MaxWSPerIP, "max-ws-per-ip", 32, "open WebSockets per client IP (HTTP 429 beyond)")
}

func (c *serveConfig) validate() error {
	switch {
	case c.InspectorTTL <= 0:
		return fmt.Errorf("--inspector-ttl must be positive")
	case c.ForwardTimeout <= 0:
		return fmt.Errorf("--forward-timeout must be positive")
	case c.CaptureCap > c.MaxBody:
		return fmt.Errorf("--capture-cap (%s) must not exceed --max-body (%s)", c.CaptureCap.String(), c.MaxBody.String())
	case c.KeepAlive <= 0:
		return fmt.Errorf("--keepalive must be positive")
	case c.MaxWSSubscriptions < 1:
		return fmt.Errorf("--max-ws-subscriptions must be at least 1")
	case c.MaxWSPerIP < 1:
		return fmt.Errorf("--max-ws-per-ip must be at least 1")
	case c.Domain == "":
		return fmt.Errorf("--domain must not be empty")
	}
	return nil
}
