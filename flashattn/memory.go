package flashattn

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
)

// MemoryError reports a call, or a tensor, that would need more host memory
// than HostMemoryLimit: it is refused before anything is allocated.
type MemoryError struct {
	What  string // what was asked for: "Forward on cpu-naive", "New [B=... ]", ...
	Need  int64  // bytes it would allocate (math.MaxInt64 when beyond int64)
	Limit int64  // HostMemoryLimit at the time
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("flashattn: %s needs %s of host memory, more than this machine allows (HostMemoryLimit %s)",
		e.What, fmtBytes(e.Need), fmtBytes(e.Limit))
}

// fmtBytes prints a byte count with a binary unit.
func fmtBytes(n int64) string {
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	x, unit := float64(n), 0
	for x >= 1<<10 && unit < 6 {
		x /= 1 << 10
		unit++
	}
	return fmt.Sprintf("%.1f %ciB", x, " KMGTPE"[unit])
}

// The host memory limit: SetHostMemoryLimit's value, else the machine's.
var hostLimit struct {
	mu      sync.Mutex
	set     int64
	once    sync.Once
	machine int64
}

// unknownMemory is the limit where the machine's memory cannot be read
// (systems other than Linux): 512 GiB, the float32 bytes of the largest
// tensor the package accepts (maxElements), so it only guards overflow.
const unknownMemory = int64(maxElements) * 4

// HostMemoryLimit is the most host memory, in bytes, that one call of the
// package (Forward, Backward, the host paths of a Device) or one New or
// Random tensor may allocate: more is refused with a *MemoryError before
// anything is allocated, where the Go runtime would end the process. It is
// the machine's physical memory (Linux: MemTotal, lowered to the cgroup's
// memory limit when one is set), read once, unless SetHostMemoryLimit
// changed it. A call below it can still fail when other programs hold the
// memory; one above it never succeeds.
func HostMemoryLimit() int64 {
	hostLimit.mu.Lock()
	defer hostLimit.mu.Unlock()
	if hostLimit.set > 0 {
		return hostLimit.set
	}
	hostLimit.once.Do(func() { hostLimit.machine = machineMemory() })
	return hostLimit.machine
}

// SetHostMemoryLimit sets HostMemoryLimit to n bytes and returns the
// previous value; n <= 0 returns to the machine's memory.
func SetHostMemoryLimit(n int64) (previous int64) {
	previous = HostMemoryLimit()
	hostLimit.mu.Lock()
	hostLimit.set = max(n, 0)
	hostLimit.mu.Unlock()
	return previous
}

// machineMemory reads the physical memory and the cgroup limit (v2, then v1).
func machineMemory() int64 {
	n := int64(0)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					n = kb << 10
				}
			}
		}
	}
	if n <= 0 {
		return unknownMemory
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if c, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && c > 0 {
				n = min(n, c) // "max", or v1's huge "no limit", leave n as is
			}
		}
	}
	return n
}

// reserve refuses what, needing bytes of host memory, when that exceeds
// HostMemoryLimit. bytes is a float64 so that absurd sizes cannot overflow.
func reserve(what string, bytes float64) error {
	lim := HostMemoryLimit()
	if bytes <= float64(lim) {
		return nil
	}
	need := int64(math.MaxInt64)
	if bytes < math.MaxInt64 {
		need = int64(bytes)
	}
	return &MemoryError{What: what, Need: need, Limit: lim}
}

// floats is the float32 bytes of n elements, in float64.
func floats(n ...int) float64 {
	s := 0.0
	for _, x := range n {
		s += float64(x)
	}
	return 4 * s
}

// slab allocates buffers of the given lengths as consecutive parts of one
// allocation: a backend lists its scratch once, and both allocates it and
// reserves its bytes (floats(lens...)) from that list.
func slab(lens ...int) [][]float32 {
	n := 0
	for _, l := range lens {
		n += l
	}
	buf := make([]float32, n)
	out := make([][]float32, len(lens))
	for i, l := range lens {
		out[i], buf = buf[:l:l], buf[l:]
	}
	return out
}
