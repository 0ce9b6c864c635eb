//go:build linux

package server

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// metrics is the answer of GET /metrics, envd's host.Metrics: what the
// sandbox's /proc and the root filesystem say (design/envd.md).
type metrics struct {
	Timestamp      int64   `json:"ts"`
	CPUCount       uint32  `json:"cpu_count"`
	CPUUsedPercent float32 `json:"cpu_used_pct"`
	MemTotalMiB    uint64  `json:"mem_total_mib"`
	MemUsedMiB     uint64  `json:"mem_used_mib"`
	MemTotal       uint64  `json:"mem_total"`
	MemUsed        uint64  `json:"mem_used"`
	MemCache       uint64  `json:"mem_cache"`
	DiskUsed       uint64  `json:"disk_used"`
	DiskTotal      uint64  `json:"disk_total"`
}

// cpuSampler turns /proc/stat's counters into the busy share since the
// previous sample (the first one: since boot), as gopsutil's cpu.Percent(0)
// does for envd.
type cpuSampler struct {
	mu          sync.Mutex
	busy, total uint64
}

func (c *cpuSampler) percent() (float32, error) {
	busy, total, err := readCPUTimes()
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	dBusy, dTotal := busy-c.busy, total-c.total
	c.busy, c.total = busy, total
	c.mu.Unlock()
	if dTotal == 0 || dBusy > dTotal {
		return 0, nil
	}
	return float32(math.Round(float64(dBusy)/float64(dTotal)*100*100) / 100), nil
}

// readCPUTimes sums the aggregate "cpu" line of /proc/stat: busy is all but
// idle and iowait.
func readCPUTimes() (busy, total uint64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	var idle uint64
	// user nice system idle iowait irq softirq steal (guest and guest_nice
	// are already counted in user and nice).
	for i, f := range fields[1:min(len(fields), 9)] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	return total - idle, total, nil
}

// readMeminfo reads the kB figures of /proc/meminfo.
func readMeminfo() (map[string]uint64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	info := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		value, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if n, err := strconv.ParseUint(value, 10, 64); err == nil {
			info[key] = n * 1024
		}
	}
	return info, sc.Err()
}

func (s *Server) collectMetrics() (*metrics, error) {
	mem, err := readMeminfo()
	if err != nil {
		return nil, err
	}
	cpuPct, err := s.cpu.percent()
	if err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil {
		return nil, err
	}
	blockSize := uint64(st.Bsize) //nolint:gosec // a block size is positive
	diskTotal := st.Blocks * blockSize
	used := mem["MemTotal"] - min(mem["MemAvailable"], mem["MemTotal"])
	return &metrics{
		Timestamp:      time.Now().UTC().Unix(),
		CPUCount:       uint32(runtime.NumCPU()), //nolint:gosec // a CPU count fits
		CPUUsedPercent: cpuPct,
		MemTotalMiB:    mem["MemTotal"] >> 20,
		MemUsedMiB:     used >> 20,
		MemTotal:       mem["MemTotal"],
		MemUsed:        used,
		MemCache:       mem["Cached"],
		DiskUsed:       diskTotal - st.Bavail*blockSize,
		DiskTotal:      diskTotal,
	}, nil
}

func (s *Server) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	m, err := s.collectMetrics()
	if err != nil {
		s.logger.Error("metrics: " + err.Error())
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, contentTypeJSON, m)
}
