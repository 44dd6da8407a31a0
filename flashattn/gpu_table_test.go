package flashattn_test

import (
	"testing"

	"github.com/goflash/goflash/flashattn"
)

func TestKernelTable(t *testing.T) {
	for _, c := range []struct {
		arch, path int
		dims       []int
	}{
		{75, 75, []int{32, 64, 96, 128, 256}},
		{86, 80, []int{32, 64, 96, 128, 256}},
		{90, 80, []int{32, 64, 96, 128, 256}},
	} {
		tab := flashattn.KernelTable(c.arch)
		if len(tab) != 2*len(c.dims) {
			t.Fatalf("sm_%d: %d kernels, want %d (D %v, causal and not)", c.arch, len(tab), 2*len(c.dims), c.dims)
		}
		seen := map[[2]int]bool{}
		for _, k := range tab {
			if k.Path != c.path || k.Br < 16 || k.Bc < 16 || k.Warps < 1 || k.SmemBytes <= 0 || k.Symbol == "" {
				t.Errorf("sm_%d: bad row %+v", c.arch, k)
			}
			if c.path == 75 && k.SmemBytes > 64<<10 {
				t.Errorf("sm_75 kernel %s needs %d bytes of shared memory, a T4 has 64 KiB", k.Symbol, k.SmemBytes)
			}
			causal := 0
			if k.Causal {
				causal = 1
			}
			seen[[2]int{k.HeadDim, causal}] = true
		}
		for _, d := range c.dims {
			if !seen[[2]int{d, 0}] || !seen[[2]int{d, 1}] {
				t.Errorf("sm_%d: no kernel pair for D=%d", c.arch, d)
			}
		}
	}
	if n := len(flashattn.KernelTable(70)); n != 0 {
		t.Errorf("sm_70: %d kernels, want none (Volta is below Turing)", n)
	}
}

func TestBackwardKernelTable(t *testing.T) {
	for _, arch := range []int{75, 86, 90} {
		tab := flashattn.BackwardKernelTable(arch)
		count := map[string]int{}
		for _, k := range tab {
			count[k.Pass]++
			if k.Large {
				count["large"]++
				if k.SmemBytes <= 99<<10 && k.Pass != "bwd_dqconv" {
					t.Errorf("sm_%d: Large kernel %s needs only %d bytes of shared memory", arch, k.Symbol, k.SmemBytes)
				}
			}
			rowsOnly := k.Pass == "bwd_pre" || k.Pass == "bwd_dqconv" // no tensor cores, no shared memory
			if k.Symbol == "" || k.Warps < 1 || k.Br < 16 || (!rowsOnly && (k.Bc < 16 || k.SmemBytes <= 0)) {
				t.Errorf("sm_%d: bad row %+v", arch, k)
			}
			if arch == 75 && k.SmemBytes > 64<<10 {
				t.Errorf("sm_75 kernel %s needs %d bytes of shared memory, a T4 has 64 KiB", k.Symbol, k.SmemBytes)
			}
		}
		// D 32, 64, 96, 128 (and on Turing 256, its column groups): one pre
		// kernel each, dK/dV and dQ causal and not;
		// on the sm_80 path D128 also has the single pass (causal and not) and
		// its dQ convert kernel, twice: the Large set (> 99 KiB, for devices
		// whose opt-in limit fits it) and the <= 99 KiB one; so does D256,
		// with its own pre kernel; each of these Large sets also the ordered
		// twin (causal and not), and so does D256's base set; D64 a Large set
		// with the causal twin alone.
		three, sets, large, det, cdet, pre := 5, 0, 0, 0, 0, 5
		if arch >= 80 {
			three, sets, large, det, cdet, pre = 4, 5, 2, 3, 1, 5
		}
		if count["bwd_pre"] != pre || count["bwd_dkdv"] != 2*three || count["bwd_dq"] != 2*three || count["bwd_dkdvq"] != 2*sets ||
			count["bwd_dqconv"] != sets || count["bwd_dkdvqdet"] != 2*det+cdet || len(tab) != 4*three+pre+3*sets+2*det+cdet ||
			count["large"] != 5*large+4*cdet {
			t.Errorf("sm_%d: backward table %v", arch, count)
		}
	}
	for _, k := range flashattn.KernelTable(90) {
		if k.Pass != "fwd" {
			t.Errorf("KernelTable lists %s (pass %q)", k.Symbol, k.Pass)
		}
	}
}
