package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of the CPU times in /proc/<pid>/stat and
// /proc/stat. Linux fixes it at 100 on every architecture Go supports.
const clockTick = 10 * time.Millisecond

// ProcCPU is the CPU time (user + system) a process has used so far, read
// from /proc/<pid>/stat. It counts every thread of the process.
func ProcCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read cpu of %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// numeric fields start after its last ')'. utime and stime are fields
	// 14 and 15, so the 12th and 13th after it.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("read cpu of %d: malformed stat %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("read cpu of %d: short stat %q", pid, s)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("read cpu of %d: bad utime/stime %q %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// ProcRSSKiB is the resident set size (VmRSS) of a process in KiB.
func ProcRSSKiB(pid int) (int, error) { return ProcStatusKiB(pid, "VmRSS") }

// ProcPeakRSSKiB is the largest resident set size (VmHWM) a process has had
// so far, in KiB.
func ProcPeakRSSKiB(pid int) (int, error) { return ProcStatusKiB(pid, "VmHWM") }

// ProcStatusKiB reads one size field ("VmRSS", "VmHWM", …) of
// /proc/<pid>/status in KiB.
func ProcStatusKiB(pid int, field string) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read %s of %d: %w", field, pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			n, err := strconv.Atoi(f[0])
			if err != nil {
				return 0, fmt.Errorf("read %s of %d: %w", field, pid, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("read %s of %d: no such line", field, pid)
}

// ProcWrittenBytes is how many bytes a process has caused to be written to
// storage so far (write_bytes in /proc/<pid>/io): its files, WALs and
// checkpoints, as the block layer saw them.
func ProcWrittenBytes(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, fmt.Errorf("read io of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read io of %d: %w", pid, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("read io of %d: no write_bytes line", pid)
}

// MachineCPU is the busy CPU time of the whole machine (every core, every
// process) so far, from the first line of /proc/stat: everything but idle,
// iowait and steal (time the hypervisor gave to other machines).
func MachineCPU() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("read machine cpu: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("read machine cpu: unexpected %q", line)
	}
	var busy int64
	// user nice system idle iowait irq softirq steal ...; guest time is
	// already inside user, so only the first eight columns are summed.
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read machine cpu: %w", err)
		}
		if i == 3 || i == 4 || i == 7 { // idle, iowait, steal
			continue
		}
		busy += n
	}
	return time.Duration(busy) * clockTick, nil
}

// CPUMeter measures the CPU a set of processes used over an interval, and
// how much the rest of the machine used meanwhile (other programs compete
// for the same cores and skew every figure).
type CPUMeter struct {
	pids    []int
	start   []time.Duration
	machine time.Duration
	began   time.Time
}

// CPUUsage is what a CPUMeter saw.
type CPUUsage struct {
	Wall    time.Duration
	PerPID  []time.Duration // in the order the pids were given
	Machine time.Duration   // busy time of all cores
}

// Others is the machine's busy time not spent in the measured processes.
func (u CPUUsage) Others() time.Duration {
	o := u.Machine
	for _, d := range u.PerPID {
		o -= d
	}
	return max(o, 0)
}

// StartCPU begins measuring the given processes (use os.Getpid() for the
// load generator itself).
func StartCPU(pids ...int) (*CPUMeter, error) {
	m := &CPUMeter{pids: pids, start: make([]time.Duration, len(pids)), began: time.Now()}
	for i, pid := range pids {
		d, err := ProcCPU(pid)
		if err != nil {
			return nil, err
		}
		m.start[i] = d
	}
	d, err := MachineCPU()
	if err != nil {
		return nil, err
	}
	m.machine = d
	return m, nil
}

// Stop returns the CPU used since StartCPU.
func (m *CPUMeter) Stop() (CPUUsage, error) {
	u := CPUUsage{Wall: time.Since(m.began), PerPID: make([]time.Duration, len(m.pids))}
	for i, pid := range m.pids {
		d, err := ProcCPU(pid)
		if err != nil {
			return CPUUsage{}, err
		}
		u.PerPID[i] = d - m.start[i]
	}
	d, err := MachineCPU()
	if err != nil {
		return CPUUsage{}, err
	}
	u.Machine = d - m.machine
	return u, nil
}

// WaitIdle waits until a process has used no CPU for quiet (it finished
// the work a load left behind, such as views catching up), or limit passed.
// It reports whether the process went quiet.
func WaitIdle(pid int, quiet, limit time.Duration) (bool, error) {
	deadline := time.Now().Add(limit)
	last, err := ProcCPU(pid)
	if err != nil {
		return false, err
	}
	for time.Now().Before(deadline) {
		time.Sleep(quiet) // sampling a process's CPU counter, not waiting on test logic
		now, err := ProcCPU(pid)
		if err != nil {
			return false, err
		}
		// One tick of slack: an idle Go process still wakes its timers.
		if now-last <= clockTick {
			return true, nil
		}
		last = now
	}
	return false, nil
}

// PID is the process id of the running agent.
func (p *Process) PID() int { return p.cmd.Process.Pid }
