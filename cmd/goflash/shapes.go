package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/goflash/goflash/flashattn"
)

// Case is one benchmarked problem: dimensions and mask.
type Case struct {
	Dims   flashattn.Dims
	Causal bool
	Page   int // decode: paged cache block size (0: contiguous)
}

func (c Case) String() string {
	d := c.Dims
	s := fmt.Sprintf("B=%d H=%d", d.B, d.Hq)
	if d.Hkv != d.Hq {
		s += fmt.Sprintf("/%d", d.Hkv)
	}
	s += fmt.Sprintf(" N=%d", d.Nq)
	if d.Nk != d.Nq {
		s += fmt.Sprintf("/%d", d.Nk)
	}
	s += fmt.Sprintf(" D=%d", d.D)
	if c.Causal {
		s += " causal"
	}
	if c.Page > 0 {
		s += fmt.Sprintf(" page=%d", c.Page)
	}
	return s
}

// shapeFlags are the flags that choose the benchmark's shapes. Zero means
// "derived": B from tokens/N, H from hidden/D, Hkv = H, Nk = N.
type shapeFlags struct {
	batch, heads, kvHeads, kvLen int
	tokens, hidden               int
	seqLens, headDims            intList
	causal                       causalFlag
}

// paperSeqLens and paperHeadDims are the FA2 paper's benchmark sweep.
var (
	paperSeqLens  = intList{512, 1024, 2048, 4096, 8192, 16384}
	paperHeadDims = intList{64, 128}
)

// cases expands the flags into the list of problems, in the order
// head dim, causal, sequence length. Every problem is validated by
// flashattn.Dims.Validate, so an impossible shape is a one-line usage error.
func (f *shapeFlags) cases() ([]Case, error) {
	for _, c := range []struct {
		flag string
		v    int
	}{{"--batch", f.batch}, {"--heads", f.heads}, {"--kv-heads", f.kvHeads}, {"--kv-len", f.kvLen}} {
		if c.v < 0 {
			return nil, usagef("%s is %d, want >= 1 (or 0 for the default)", c.flag, c.v)
		}
	}
	if f.tokens < 1 || f.hidden < 1 {
		return nil, usagef("--tokens and --hidden must be >= 1")
	}
	var out []Case
	for _, dim := range f.headDims {
		if dim < 1 {
			return nil, usagef("--headdims: head dim %d, want >= 1", dim)
		}
		for _, causal := range f.causal {
			for _, n := range f.seqLens {
				if n < 1 {
					return nil, usagef("--seqlens: sequence length %d, want >= 1", n)
				}
				d := flashattn.Dims{B: f.batch, Nq: n, Nk: f.kvLen, Hq: f.heads, Hkv: f.kvHeads, D: dim}
				if d.B == 0 {
					d.B = max(1, f.tokens/n)
				}
				if d.Hq == 0 {
					d.Hq = max(1, f.hidden/dim)
				}
				if d.Hkv == 0 {
					d.Hkv = d.Hq
				}
				if d.Nk == 0 {
					d.Nk = n
				}
				if err := d.Validate(); err != nil {
					return nil, &usageError{strings.TrimPrefix(err.Error(), "flashattn: ") + shapeHint(d)}
				}
				// Far beyond any memory (and the library's own size limit);
				// in float64 so that absurd flags cannot overflow.
				if el := float64(d.B) * float64(max(d.Nq, d.Nk)) * float64(d.Hq) * float64(d.D); el > 1<<37 {
					return nil, usagef("%s has %.3g elements per tensor: too large", Case{Dims: d, Causal: causal}, el)
				}
				out = append(out, Case{Dims: d, Causal: causal})
			}
		}
	}
	if len(out) == 0 {
		return nil, usagef("no shapes to run")
	}
	return out, nil
}

func shapeHint(d flashattn.Dims) string {
	if d.Hkv > 0 && d.Hq%d.Hkv != 0 {
		return fmt.Sprintf(" (--heads %d is not a multiple of --kv-heads %d)", d.Hq, d.Hkv)
	}
	return ""
}

// hostBytes estimates the host memory one CPU run of c needs: q, k, v, the
// output and the gradients as float32, plus the Nq x Nk matrices the naive
// backend materialises (S and P forward; P, dP and dS backward). In float64,
// so that absurd shapes cannot overflow; beyond int64 it is MaxInt64.
func hostBytes(c Case, be flashattn.Backend, backward bool) int64 {
	d := c.Dims
	q := float64(d.B) * float64(d.Nq) * float64(d.Hq) * float64(d.D)
	kv := float64(d.B) * float64(d.Nk) * float64(d.Hkv) * float64(d.D)
	n := 3*q + 2*kv + float64(d.B)*float64(d.Hq)*float64(d.Nq) // q, out, dOut; k, v; the LSE
	if backward {
		n += q + 2*kv // dq, dk, dv
	}
	if be == flashattn.CPUNaive {
		mats := 2.0
		if backward {
			mats = 3
		}
		n += mats * float64(d.Nq) * float64(d.Nk)
	}
	if 4*n >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(4 * n)
}

// deviceBytes is the device memory of one GPU forward call: q, k, v and o
// in fp16 and the float32 LSE.
func deviceBytes(d flashattn.Dims) int64 {
	return 2*(2*int64(d.QShape().Numel())+2*int64(d.KVShape().Numel())) + 4*int64(d.LSELen())
}

// checkHostMemory refuses a CPU run that would not fit in the host's
// memory (the library's limit, flashattn.HostMemoryLimit) before anything
// is allocated, instead of letting the Go runtime die of it.
func checkHostMemory(c Case, be flashattn.Backend, backward bool) error {
	if need, lim := hostBytes(c, be, backward), flashattn.HostMemoryLimit(); need > lim {
		return tooLargef("%s on %s needs about %s of host memory; this machine allows %s", c, be, fmtBytes(need), fmtBytes(lim))
	}
	return nil
}

// fmtBytes prints a byte count with a binary unit.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
