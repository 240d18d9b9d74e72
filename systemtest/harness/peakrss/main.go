// Command peakrss runs a command and writes its peak resident set size in
// KiB to the file named by PEAKRSS_OUT, passing its output and exit code on.
//
// A test cannot read a short-lived child's peak from its own wait status:
// Linux counts in a child's ru_maxrss the memory of the process it was
// started from (the exec'ing mm's high-water mark), which for a test binary
// under the race detector is hundreds of MiB. Started from this small
// process instead, the command's figure is its own.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

func main() {
	if len(os.Args) < 2 || os.Getenv("PEAKRSS_OUT") == "" {
		fmt.Fprintln(os.Stderr, "usage: PEAKRSS_OUT=FILE peakrss COMMAND [ARG...]")
		os.Exit(125)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(125)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		fmt.Fprintln(os.Stderr, "peakrss: no resource usage for the command")
		os.Exit(125)
	}
	if err := os.WriteFile(os.Getenv("PEAKRSS_OUT"), []byte(strconv.FormatInt(ru.Maxrss, 10)), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(125)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
