package flashattn

import (
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
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
	// addressSpace: an address-space limit (RLIMIT_AS) is in force.
	addressSpace bool
}

// unknownMemory is the limit where the machine's memory cannot be read
// (systems other than Linux): 512 GiB, the float32 bytes of the largest
// tensor the package accepts (maxElements), so it only guards overflow.
const unknownMemory = int64(maxElements) * 4

// HostMemoryLimit is the most host memory, in bytes, that one call of the
// package (Forward, Backward, the host paths of a Device) or one New or
// Random tensor may allocate: more is refused with a *MemoryError before
// anything is allocated, where the Go runtime would end the process. It is
// the machine's physical memory (Linux: MemTotal), lowered to the memory
// limit of the process's own cgroup (v2 memory.max or v1
// memory.limit_in_bytes, the smallest from its cgroup up to the root) and
// to what the address-space limit (RLIMIT_AS, ulimit -v) leaves: the
// address space the process had mapped when the limit was first read (the
// Go runtime's own reservations) is taken off, and a quarter of the rest is
// left to the runtime; under such a limit a call of more than an eighth of
// it first collects the garbage of earlier calls (runtime.GC), whose
// address space is reusable only then. It is read once, unless
// SetHostMemoryLimit changed it. A call below it can still fail when other
// programs, or this one, hold the memory; one above it never succeeds.
func HostMemoryLimit() int64 {
	lim, _ := hostMemoryLimit()
	return lim
}

// hostMemoryLimit is HostMemoryLimit and whether an address-space limit is
// in force.
func hostMemoryLimit() (lim int64, addressSpace bool) {
	hostLimit.mu.Lock()
	defer hostLimit.mu.Unlock()
	hostLimit.once.Do(func() { hostLimit.machine, hostLimit.addressSpace = machineMemory() })
	if hostLimit.set > 0 {
		return hostLimit.set, hostLimit.addressSpace
	}
	return hostLimit.machine, hostLimit.addressSpace
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

// machineMemory is the least of the physical memory, the process's
// cgroup's memory limit and what the address-space limit leaves, and
// whether there is an address-space limit.
func machineMemory() (n int64, addressSpace bool) {
	n = physicalMemory("/")
	if n <= 0 {
		n = unknownMemory
	}
	if c := cgroupMemoryLimit("/"); c > 0 {
		n = min(n, c)
	}
	a, ok := addressSpaceLimit()
	if ok {
		n = min(n, a)
	}
	return n, ok
}

// physicalMemory is MemTotal of root's /proc/meminfo, 0 where unreadable.
func physicalMemory(root string) int64 {
	b, err := os.ReadFile(filepath.Join(root, "proc", "meminfo"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > 0 && kb < 1<<52 {
				return kb << 10
			}
		}
	}
	return 0
}

// noLimit is where a limit stops meaning one: cgroup v1 writes "no limit"
// as about 2^63, and no address space is this large.
const noLimit = 1 << 62

// cgroupMount is where a cgroup hierarchy is mounted (point) and which of
// its cgroups the mount shows there (root, "/" for the whole hierarchy).
type cgroupMount struct{ point, root string }

// cgroupMounts finds the cgroup v2 mount and the v1 memory controller's in
// root's /proc/self/mountinfo; where that cannot be read, the usual places
// (/sys/fs/cgroup, /sys/fs/cgroup/memory).
func cgroupMounts(root string) (v2, v1 *cgroupMount) {
	b, err := os.ReadFile(filepath.Join(root, "proc", "self", "mountinfo"))
	if err != nil {
		return &cgroupMount{"/sys/fs/cgroup", "/"}, &cgroupMount{"/sys/fs/cgroup/memory", "/"}
	}
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root point options [optional...] - fstype source superoptions
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 5 || len(f) < sep+4 {
			continue
		}
		m := &cgroupMount{unescapeMount(f[4]), unescapeMount(f[3])}
		switch fstype := f[sep+1]; {
		case fstype == "cgroup2" && v2 == nil:
			v2 = m
		case fstype == "cgroup" && v1 == nil && slices.Contains(strings.Split(f[sep+3], ","), "memory"):
			v1 = m
		}
	}
	return v2, v1
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupMemoryLimit is the memory limit of the process's own cgroup as
// root's /proc/self/cgroup names it: the smallest of memory.max (v2) and
// memory.limit_in_bytes (v1) from that cgroup's directory under its
// hierarchy's mount up to the mount's root; 0 where none is set. A cgroup
// path outside what the mount shows (a container's view of the host's
// path) leaves the mount's root, the container's own cgroup.
func cgroupMemoryLimit(root string) int64 {
	b, err := os.ReadFile(filepath.Join(root, "proc", "self", "cgroup"))
	if err != nil {
		return 0
	}
	v2, v1 := cgroupMounts(root)
	limit := int64(0)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3) // hierarchy-ID:controllers:path
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		m, file := v2, "memory.max"
		if f[0] != "0" || f[1] != "" {
			m, file = v1, "memory.limit_in_bytes"
			if !slices.Contains(strings.Split(f[1], ","), "memory") {
				continue
			}
		}
		if m == nil {
			continue
		}
		rel := path.Clean(f[2])
		if m.root != "/" {
			if r, ok := strings.CutPrefix(rel, path.Clean(m.root)); ok && (r == "" || r[0] == '/') {
				rel = path.Clean("/" + r)
			} else {
				rel = "/"
			}
		}
		for dir := rel; ; dir = path.Dir(dir) {
			if c := readLimit(filepath.Join(root, filepath.FromSlash(m.point), filepath.FromSlash(dir), file)); c > 0 && (limit == 0 || c < limit) {
				limit = c
			}
			if dir == "/" {
				break
			}
		}
	}
	return limit
}

// readLimit reads a cgroup limit file: its bytes, or 0 for "max", v1's
// "no limit", an unreadable file or anything else.
func readLimit(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	c, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || c <= 0 || c >= noLimit {
		return 0
	}
	return c
}

// addressSpaceAvail is the part of an address-space limit of cur bytes
// that HostMemoryLimit may give to one call when the process has mapped
// bytes already: three quarters of the rest, the last quarter left to the
// Go runtime. ok is false where cur is no limit (RLIM_INFINITY).
func addressSpaceAvail(cur uint64, mapped int64) (n int64, ok bool) {
	if cur >= noLimit {
		return 0, false
	}
	left := int64(cur) - max(mapped, 0)
	if left <= 0 {
		return 0, true
	}
	return left - left/4, true
}

// reserve refuses what, needing bytes of host memory, when that exceeds
// HostMemoryLimit. bytes is a float64 so that absurd sizes cannot overflow.
func reserve(what string, bytes float64) error {
	lim, addressSpace := hostMemoryLimit()
	if bytes <= float64(lim) {
		if addressSpace && bytes > float64(lim)/8 {
			// Under an address-space limit the garbage of earlier calls
			// holds address space the runtime reuses only once it is
			// collected: collect it before a large allocation.
			runtime.GC()
		}
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
