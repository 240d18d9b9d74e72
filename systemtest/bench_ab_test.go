package systemtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestBenchABMedians runs scripts/bench-ab's summary over a log of known
// rounds: the median of an odd count (after) is the middle value, of an
// even count (before) the mean of the two middle ones, the range is the rounds' least
// and greatest, the GOMAXPROCS suffix is dropped from the name, and a
// figure only one side has is left out.
func TestBenchABMedians(t *testing.T) {
	awk, err := exec.LookPath("awk")
	if err != nil {
		t.Skip("no awk on PATH: scripts/bench-ab needs it")
	}
	log := strings.Join([]string{
		"== before proxy 10:00:00",
		"BenchmarkProxy/binary/c=16-2 4000 300 relay-cpu-ms/1k 0.10 proxy/direct",
		"== after proxy 10:00:30",
		"BenchmarkProxy/binary/c=16-2 4000 250 relay-cpu-ms/1k 0.12 proxy/direct 7 only-after",
		"== after proxy 10:01:00",
		"BenchmarkProxy/binary/c=16-2 4000 270 relay-cpu-ms/1k 0.11 proxy/direct",
		"== before proxy 10:01:30",
		"BenchmarkProxy/binary/c=16-2 4000 500 relay-cpu-ms/1k 0.08 proxy/direct",
		"== before proxy 10:02:00",
		"BenchmarkProxy/binary/c=16-2 4000 320 relay-cpu-ms/1k 0.09 proxy/direct",
		"== after proxy 10:02:30",
		"BenchmarkProxy/binary/c=16-2 4000 260 relay-cpu-ms/1k 0.13 proxy/direct",
		"== before proxy 10:03:00",
		"BenchmarkProxy/binary/c=16-2 4000 310 relay-cpu-ms/1k 0.11 proxy/direct",
		"",
	}, "\n")
	path := filepath.Join(t.TempDir(), "ab.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(awk, "-f", filepath.Join(harness.ModuleRoot(), "scripts", "lib", "medians.awk"), path).CombinedOutput()
	if err != nil {
		t.Fatalf("medians.awk: %v\n%s", err, out)
	}
	want := strings.Join([]string{
		"| benchmark | figure | before | after |",
		"|---|---|---:|---:|",
		"| BenchmarkProxy/binary/c=16 | relay-cpu-ms/1k | 315 [300–500] | 260 [250–270] |",
		"| BenchmarkProxy/binary/c=16 | proxy/direct | 0.095 [0.08–0.11] | 0.12 [0.11–0.13] |",
		"",
	}, "\n")
	if string(out) != want {
		t.Errorf("medians.awk printed\n%s\nwant\n%s", out, want)
	}
}
