package kernels

import (
	"slices"
	"sort"
)

//go:generate bash ../../kernels/build.sh

// The kernel images (Image: one fatbin per kernel family, each with its
// Turing PTX, and the Hopper cubin) are embedded by images.go; a build with
// the goflash_nogpu tag embeds none (images_nogpu.go: empty slices, Embedded
// false), for CPU-only programs about 30 MB smaller. The tables (Variants,
// Lookup...) are in every build.

// The CUDA releases whose nvcc built the family fatbins (and their Turing
// PTX) and SM90ACubin (kernels/build.sh, kernels/cuda12.sh): a driver older
// than the release may refuse the image (its PTX ISA, its cubin format).
const (
	FatbinCUDA     = "11.8"
	SM90ACubinCUDA = "12.4"
)

// FatbinMagic is the first 4 bytes of a CUDA fatbin (0xBA55ED50, little endian).
var FatbinMagic = []byte{0x50, 0xed, 0x55, 0xba}

// Path returns the kernel path for a device's compute capability as an
// integer (major*10 + minor, e.g. 75, 86, 90): 80 for sm_80 and newer, 75 for
// sm_75..sm_79, and 0 (no kernels) below Turing.
func Path(arch int) int {
	switch {
	case arch >= 80:
		return 80
	case arch >= 75:
		return 75
	}
	return 0
}

// Lookup returns the forward kernel for a device of compute capability arch
// (75..90; a path, 75 or 80, works too), head dim and causality. ok is false
// below sm_75 and for head dims the path has no kernel for (see HeadDims).
func Lookup(arch, headDim int, causal bool) (v Variant, ok bool) {
	return LookupPass(Fwd, arch, headDim, causal)
}

// BaseSmemBytes is the shared memory per block every sm_80+ part can opt in
// to (sm_86/89: 99 KiB): rows above it are Large. LookupPass and LookupBF16
// assume it; LookupFit takes a device's own limit.
const BaseSmemBytes = 99 << 10

// LookupPass is Lookup for any pass (fp16 kernels) on a device that allows
// BaseSmemBytes per block (LookupFit with that limit: never a Large kernel).
// BwdPre, BwdPreVarlen and BwdDQConv kernels do not depend on the mask:
// causal is ignored for them.
func LookupPass(pass Pass, arch, headDim int, causal bool) (v Variant, ok bool) {
	return lookup(pass, false, arch, headDim, causal, BaseSmemBytes)
}

// LookupBF16 is LookupPass for the bf16 kernels: every fp16 kernel of the
// sm_80 path has one with the same tile; ok is false on the sm_75 path (no
// bf16 tensor cores) and for head dims without one.
func LookupBF16(pass Pass, arch, headDim int, causal bool) (v Variant, ok bool) {
	return lookup(pass, true, arch, headDim, causal, BaseSmemBytes)
}

// LookupFit is LookupPass (bf16: LookupBF16) for a device whose opt-in
// shared memory per block (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
// is smemOptin bytes: per pass and head dim the table may hold a Large row
// and a <= BaseSmemBytes one; the device runs the Large kernels of a (path,
// head dim, dtype) when every one of them fits its limit (they share the dQ
// accumulator's layout, so they go together), else the other row.
func LookupFit(pass Pass, bf16 bool, arch, headDim int, causal bool, smemOptin int) (v Variant, ok bool) {
	return lookup(pass, bf16, arch, headDim, causal, smemOptin)
}

// LookupDecode returns the decode kernel for arch and head dim (bf16: the
// sm_80 path only); ok is false where there is none.
func LookupDecode(arch, headDim int, bf16 bool) (dec Variant, ok bool) {
	return lookup(Decode, bf16, arch, headDim, false, BaseSmemBytes)
}

func lookup(pass Pass, bf16 bool, arch, headDim int, causal bool, smemOptin int) (v Variant, ok bool) {
	p := Path(arch)
	large := largeFits(p, headDim, bf16, smemOptin)
	for _, v := range variants {
		if v.Pass == pass && v.BF16 == bf16 && v.Arch == p && v.HeadDim == headDim && (v.Causal == causal || pass == BwdPre || pass == BwdPreVarlen || pass == BwdDQConv) &&
			(!v.Large || large) {
			return v, true
		}
	}
	return Variant{}, false
}

// largeFits says whether the Large kernels of (path, head dim, dtype), if
// any, all fit smemOptin bytes of shared memory per block.
func largeFits(path, headDim int, bf16 bool, smemOptin int) bool {
	for _, v := range variants {
		if v.Large && v.Arch == path && v.HeadDim == headDim && v.BF16 == bf16 && v.SmemBytes > smemOptin {
			return false
		}
	}
	return true
}

// HeadDims lists, ascending, the head dims with forward kernels for compute
// capability arch (nil below sm_75).
func HeadDims(arch int) []int { return PassHeadDims(Fwd, arch) }

// PassHeadDims lists, ascending, the head dims with kernels of the pass for
// compute capability arch. The backward needs all three of its passes; they
// exist for the same head dims (BwdHeadDims).
func PassHeadDims(pass Pass, arch int) []int {
	p := Path(arch)
	var ds []int
	for _, v := range variants {
		if v.Pass == pass && v.Arch == p && !v.Causal && !v.BF16 && !v.Large { // a Large row has a base sibling
			ds = append(ds, v.HeadDim)
		}
	}
	sort.Ints(ds)
	return ds
}

// BwdHeadDims lists the head dims with the three-kernel backward for arch
// (every part of the path; Options.Deterministic's backward).
func BwdHeadDims(arch int) []int { return PassHeadDims(BwdDKDV, arch) }

// BwdHeadDimsFit lists, ascending, the head dims with a backward on a device
// of arch whose opt-in shared memory per block is smemOptin bytes, when the
// single pass is fused (BwdDKDVQ, or its ordered twin BwdDKDVQDet for
// Options.Deterministic): BwdHeadDims and the head dims whose fused kernel
// (a Large row alone at D 256) fits it (LookupFit).
func BwdHeadDimsFit(fused Pass, arch, smemOptin int) []int {
	ds := BwdHeadDims(arch)
	for _, v := range variants {
		if v.Pass == fused && v.Arch == Path(arch) && !v.Causal && !v.BF16 && !slices.Contains(ds, v.HeadDim) {
			if _, ok := LookupFit(fused, false, arch, v.HeadDim, false, smemOptin); ok {
				ds = append(ds, v.HeadDim)
			}
		}
	}
	sort.Ints(ds)
	return ds
}

// Variants returns a copy of the whole table (both paths, causal and not).
func Variants() []Variant { return append([]Variant(nil), variants...) }
