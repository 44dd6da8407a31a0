package flashattn

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// underASEnv makes the test binary the child of
// TestMemoryLimitUnderAddressSpaceLimit: it runs under `ulimit -v`.
const underASEnv = "GOFLASH_TEST_UNDER_ULIMIT_V"

// TestMemoryLimitUnderAddressSpaceLimit: under an address-space limit
// (ulimit -v, RLIMIT_AS) below the machine's memory, HostMemoryLimit
// follows it, so inputs whose allocations the limit cannot take are a
// *MemoryError, not "fatal error: out of memory" ending the process: a
// zero-stride view of 2^31 rows (8 GiB of output, 8 GiB of LSE) and a trace
// of 2.7e8 steps (8.6 GB). The test binary runs itself under the limit.
func TestMemoryLimitUnderAddressSpaceLimit(t *testing.T) {
	if os.Getenv(underASEnv) == "1" {
		underAddressSpaceLimit(t)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("RLIMIT_AS is read on Linux")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run ulimit -v")
	}
	const kb = 6000000 // ulimit -v's unit is KiB: 5.7 GiB
	cmd := exec.Command(sh, "-c", `ulimit -v `+"6000000"+` && exec "$0" -test.run='^TestMemoryLimitUnderAddressSpaceLimit$' -test.v`, os.Args[0])
	cmd.Env = append(os.Environ(), underASEnv+"=1")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if i := strings.Index(text, "fatal error"); i >= 0 {
		text = text[i:min(len(text), i+600)] // the runtime's message and the first frames
	}
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("under ulimit -v %d: %v\n%s", kb, err, text)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if _, msg, ok := strings.Cut(l, "HostMemoryLimit under"); ok {
			t.Log("child: HostMemoryLimit under" + msg)
		}
	}
}

// underAddressSpaceLimit is the child's part: the three inputs are refused,
// and what fits the limit still runs.
func underAddressSpaceLimit(t *testing.T) {
	lim := HostMemoryLimit()
	t.Logf("HostMemoryLimit under ulimit -v 6000000: %s", fmtBytes(lim))
	if lim >= 6000000<<10 {
		t.Errorf("HostMemoryLimit %s is not below the address-space limit of %s", fmtBytes(lim), fmtBytes(6000000<<10))
	}
	view := &Tensor{Shape: Shape{B: 1, N: 1 << 31, H: 1, D: 1}, Data: []float32{1}}
	one := Random(Shape{B: 1, N: 1, H: 1, D: 1}, 1)
	_, err := Forward(view, one, one, &Options{Backend: CPUFlash})
	wantMemoryError(t, "2^31-row zero-stride view", err)
	n := Random(Shape{B: 1, N: 16432, H: 1, D: 1}, 2) // 16432^2 = 2.7e8 1x1 tiles
	_, err = Forward(n, n, n, &Options{Backend: CPUFlash, BlockQ: 1, BlockK: 1, Trace: &Trace{}})
	wantMemoryError(t, "trace of 2.7e8 steps", err)
	_, err = Make(Shape{B: 1, N: 1 << 31, H: 1, D: 1})
	wantMemoryError(t, "Make of 8 GiB", err)
	// What the limit allows is there: a tensor of all of it, twice (the
	// first one garbage by then, collected by the second's reservation).
	for range 2 {
		if x, err := Make(Shape{B: 1, N: int(lim / 4), H: 1, D: 1}); err != nil || len(x.Data) != int(lim/4) {
			t.Fatalf("Make of HostMemoryLimit bytes: %v", err)
		}
	}
}

// TestCgroupMemoryLimit reads the process's own cgroup's memory limit from
// fixture trees: /proc/self/cgroup's path under the controller's mount
// (found in /proc/self/mountinfo, else /sys/fs/cgroup and
// /sys/fs/cgroup/memory), the smallest limit from there up to the mount's
// root, v2's memory.max and v1's memory.limit_in_bytes.
func TestCgroupMemoryLimit(t *testing.T) {
	const (
		gib     = int64(1) << 30
		v1Unset = "9223372036854771712\n" // v1's "no limit"
	)
	for _, c := range []struct {
		what  string
		files map[string]string
		want  int64 // 0: no limit
	}{
		{"v2, a limit two levels up", map[string]string{
			"proc/self/cgroup":                                  "0::/user.slice/app.scope\n",
			"sys/fs/cgroup/memory.max":                          "max\n",
			"sys/fs/cgroup/user.slice/memory.max":               "8589934592\n",
			"sys/fs/cgroup/user.slice/app.scope/memory.max":     "max\n",
			"sys/fs/cgroup/user.slice/app.scope/memory.current": "123\n",
		}, 8 * gib},
		{"v2, the leaf lower than its parent", map[string]string{
			"proc/self/cgroup":                              "0::/user.slice/app.scope\n",
			"sys/fs/cgroup/user.slice/memory.max":           "8589934592\n",
			"sys/fs/cgroup/user.slice/app.scope/memory.max": "1073741824\n",
		}, 1 * gib},
		{"v2, no limit anywhere", map[string]string{
			"proc/self/cgroup":                              "0::/user.slice/app.scope\n",
			"sys/fs/cgroup/memory.max":                      "max\n",
			"sys/fs/cgroup/user.slice/app.scope/memory.max": "max\n",
		}, 0},
		{"v2 in a cgroup namespace: the mount's root is the container", map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "4294967296\n",
		}, 4 * gib},
		{"v2, the host's path not under the mount: its root's limit", map[string]string{
			"proc/self/cgroup":         "0::/kubepods/burstable/pod1/ctr\n",
			"sys/fs/cgroup/memory.max": "3221225472\n",
		}, 3 * gib},
		{"v1 memory controller", map[string]string{
			"proc/self/cgroup":                                            "9:name=systemd:/\n5:devices:/\n4:memory:/process_api/f99d\n3:cpu,cpuacct:/\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                  v1Unset,
			"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":      "6442450944\n",
			"sys/fs/cgroup/memory/process_api/f99d/memory.limit_in_bytes": "2147483648\n",
		}, 2 * gib},
		{"v1, unset", map[string]string{
			"proc/self/cgroup":                                            "4:memory:/process_api/f99d\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                  v1Unset,
			"sys/fs/cgroup/memory/process_api/f99d/memory.limit_in_bytes": v1Unset,
		}, 0},
		{"hybrid: v2 mounted at unified (mountinfo), v1 memory elsewhere", map[string]string{
			"proc/self/cgroup": "4:memory:/a\n0::/b/c\n",
			"proc/self/mountinfo": "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
				"35 31 0:32 / /sys/fs/cgroup/mem\\040ory rw,relatime - cgroup cgroup rw,memory\n" +
				"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
			"sys/fs/cgroup/mem ory/a/memory.limit_in_bytes": "5368709120\n",
			"sys/fs/cgroup/unified/b/memory.max":            "7516192768\n",
			"sys/fs/cgroup/unified/b/c/memory.max":          "max\n",
			"sys/fs/cgroup/memory.max":                      "1\n", // not a cgroup2 mount here: not read
		}, 5 * gib},
		{"a mount of a sub-cgroup (mountinfo root): the path is taken relative to it", map[string]string{
			"proc/self/cgroup":             "0::/kubepods/pod1/ctr/sub\n",
			"proc/self/mountinfo":          "41 31 0:38 /kubepods/pod1/ctr /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
			"sys/fs/cgroup/memory.max":     "6442450944\n",
			"sys/fs/cgroup/sub/memory.max": "max\n",
		}, 6 * gib},
		{"garbage and empty files", map[string]string{
			"proc/self/cgroup":              "0::/x\nnonsense\n::\n",
			"sys/fs/cgroup/memory.max":      "\n",
			"sys/fs/cgroup/x/memory.max":    "-5\n",
			"sys/fs/cgroup/memory/memory.x": "1\n",
		}, 0},
		{"no /proc/self/cgroup", map[string]string{}, 0},
	} {
		root := t.TempDir()
		for p, s := range c.files {
			p = filepath.Join(root, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := cgroupMemoryLimit(root); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
}

// TestAddressSpaceHeadroom: of an address-space limit, what the process
// has already mapped is taken off, and a quarter of the rest is left to
// the Go runtime (heap growth, garbage not yet collected); no limit, or one
// already spent, is said so.
func TestAddressSpaceHeadroom(t *testing.T) {
	const gib = int64(1) << 30
	for _, c := range []struct {
		cur    uint64
		mapped int64
		want   int64
		ok     bool
	}{
		{^uint64(0), 1 * gib, 0, false}, // RLIM_INFINITY
		{uint64(9 * gib), 1 * gib, 6 * gib, true},
		{uint64(5 * gib), 1 * gib, 3 * gib, true},
		{uint64(1 * gib), 2 * gib, 0, true}, // nothing left
		{1 << 62, 0, 0, false},              // beyond any address space: none
	} {
		got, ok := addressSpaceAvail(c.cur, c.mapped)
		if got != c.want || ok != c.ok {
			t.Errorf("addressSpaceAvail(%d, %d) = %d, %t; want %d, %t", c.cur, c.mapped, got, ok, c.want, c.ok)
		}
	}
}
