// Command tracestages reads a Go execution trace of a server under a
// one-sender load (RELAY_BENCH_TRACE, RELAY_BENCH_AGENT_TRACE) and tells
// where each request's time goes between system calls that mark its
// stages: the time from the end of one marker call to the start of the
// next, for every request, as percentiles. A marker is a substring of the
// call's stack (its Go frames, innermost first, joined by " < "); the
// markers must occur in order once per request, as they do at one sender.
//
//	go run . -marks 'connReader).Read,connReader).Read,cork.(*Conn).Write,_walFrames,checkConnErrorWriter' relay.trace
//	go run . -calls relay.trace    # every kind of call, how many and how long
//
// It keeps every system call of the trace (its times and two strings
// shared by the calls of one stack: some 40 bytes a call), so its memory
// grows with the trace it is given, as go tool trace's does. It is a module
// of its own so that the relay does not depend on golang.org/x/exp.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	marks := flag.String("marks", "", "comma-separated markers, in each request's order")
	calls := flag.Bool("calls", false, "list the kinds of system calls instead: count, mean time, stack and the goroutine's root")
	depth := flag.Int("depth", 6, "Go frames of a call's stack kept for matching and listing")
	flag.Parse()
	if flag.NArg() != 1 || (*marks == "") == !*calls {
		log.Fatal("usage: tracestages (-marks a,b,... | -calls) [-depth n] file.trace")
	}
	all, err := syscalls(flag.Arg(0), *depth)
	if err != nil {
		log.Fatal(err)
	}
	if *calls {
		listCalls(os.Stdout, all)
		return
	}
	stages(os.Stdout, all, strings.Split(*marks, ","))
}

// call is one system call a goroutine made: when, and the stack it was
// made from.
type call struct {
	start, end trace.Time
	stack      string
	root       string
}

func syscalls(path string, depth int) ([]call, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	open := map[trace.GoID]*call{}
	// A stack's frames are read once: the same few stacks make every call.
	type named struct{ stack, root string }
	stacks := map[trace.Stack]named{}
	var all []call
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		g := st.Resource.Goroutine()
		from, to := st.Goroutine()
		switch {
		case from == trace.GoRunning && to == trace.GoSyscall:
			st := ev.Stack()
			n, ok := stacks[st]
			if !ok {
				n.stack, n.root = frames(st, depth)
				stacks[st] = n
			}
			open[g] = &call{start: ev.Time(), stack: n.stack, root: n.root}
		case from == trace.GoSyscall:
			if c := open[g]; c != nil {
				c.end = ev.Time()
				all = append(all, *c)
				delete(open, g)
			}
		}
	}
	slices.SortFunc(all, func(a, b call) int { return int(a.start - b.start) })
	return all, nil
}

// frames returns the first depth Go frames of st that are not the
// runtime's, the system call package's or the C library's, and the
// outermost frame (the goroutine's root).
func frames(st trace.Stack, depth int) (stack, root string) {
	var kept []string
	for f := range st.Frames() {
		fn := f.Func
		if strings.HasPrefix(fn, "runtime.") {
			continue
		}
		root = fn
		if strings.HasPrefix(fn, "syscall.") || strings.HasPrefix(fn, "internal/") || strings.HasPrefix(fn, "modernc.org/libc") {
			continue
		}
		if len(kept) < depth {
			kept = append(kept, fn)
		}
	}
	return strings.Join(kept, " < "), root
}

// stages walks the calls in time order, finding the markers in turn, and
// prints for each pair of consecutive markers the time from the end of the
// first to the start of the second, and the marker calls' own times.
func stages(w io.Writer, all []call, marks []string) {
	gaps := make([][]time.Duration, len(marks))
	inside := make([][]time.Duration, len(marks))
	next := 0
	var last trace.Time
	for _, c := range all {
		if !strings.Contains(c.stack, marks[next]) {
			continue
		}
		if next > 0 {
			gaps[next] = append(gaps[next], time.Duration(c.start-last))
		}
		inside[next] = append(inside[next], time.Duration(c.end-c.start))
		last = c.end
		next = (next + 1) % len(marks)
	}
	fmt.Fprintf(w, "%-8s %8s %8s %8s  %s\n", "", "n", "p50 µs", "p90 µs", "stage")
	for i, m := range marks {
		if i > 0 {
			line(w, "between", gaps[i], marks[i-1]+"  →  "+m)
		}
		line(w, "in", inside[i], m)
	}
}

func line(w io.Writer, kind string, d []time.Duration, what string) {
	if len(d) == 0 {
		fmt.Fprintf(w, "%-8s %8d %8s %8s  %s\n", kind, 0, "-", "-", what)
		return
	}
	slices.Sort(d)
	us := func(x time.Duration) float64 { return float64(x) / float64(time.Microsecond) }
	fmt.Fprintf(w, "%-8s %8d %8.1f %8.1f  %s\n", kind, len(d), us(d[len(d)/2]), us(d[len(d)*9/10]), what)
}

// listCalls prints each kind of call (its stack and its goroutine's root):
// how many, and their mean time.
func listCalls(w io.Writer, all []call) {
	type kind struct {
		n     int
		total time.Duration
	}
	kinds := map[string]*kind{}
	for _, c := range all {
		key := c.stack + "  @ " + c.root
		k := kinds[key]
		if k == nil {
			k = &kind{}
			kinds[key] = k
		}
		k.n++
		k.total += time.Duration(c.end - c.start)
	}
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return kinds[b].n - kinds[a].n })
	for _, k := range keys[:min(len(keys), 40)] {
		fmt.Fprintf(w, "%8d %9.1f µs  %s\n", kinds[k].n, float64(kinds[k].total)/float64(kinds[k].n)/1e3, k)
	}
}
