//go:build linux

package flashattn

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// addressSpaceLimit is what RLIMIT_AS (ulimit -v) leaves one call
// (addressSpaceAvail), the address space mapped now (VmSize) taken off;
// ok is false where there is no such limit.
func addressSpaceLimit() (int64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil {
		return 0, false
	}
	return addressSpaceAvail(uint64(r.Cur), mappedBytes())
}

// mappedBytes is the process's mapped address space (VmSize of
// /proc/self/status), 0 where unreadable.
func mappedBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmSize:" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > 0 && kb < 1<<52 {
				return kb << 10
			}
		}
	}
	return 0
}
