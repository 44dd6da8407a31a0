package kernels

import "slices"

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

// BaseSmemBytes is the shared memory per block every sm_80+ part can opt in
// to (sm_86/89: 99 KiB): rows above it are Large.
const BaseSmemBytes = 99 << 10

// byKey indexes every table (shipped, Hopper, ladder) by Key; the tables
// hold one kernel per key (TestKeysUnique).
var byKey = index()

func index() map[Key]Variant {
	m := map[Key]Variant{}
	for _, t := range [][]Variant{variants, sm90aVariants, ladderVariants} {
		for _, v := range t {
			m[v.Key] = v
		}
	}
	return m
}

// Lookup returns the kernel of key k; ok is false where none is shipped.
func Lookup(k Key) (v Variant, ok bool) {
	v, ok = byKey[k]
	return v, ok
}

// LargeFits says whether a device of kernel path arch whose opt-in shared
// memory per block (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
// is smemOptin bytes runs the Large rows of (head dim, dtype): every one of
// them must fit (they share the dQ accumulator's layout, so they go
// together). A set without Large rows fits.
func LargeFits(arch, headDim int, bf16 bool, smemOptin int) bool {
	for _, v := range variants {
		if v.Large && v.Arch == arch && v.HeadDim == headDim && v.BF16 == bf16 && v.SmemBytes > smemOptin {
			return false
		}
	}
	return true
}

// HeadDims lists, ascending, the head dims D with a kernel of key k with
// HeadDim D (k's own HeadDim is ignored).
func HeadDims(k Key) []int {
	var ds []int
	for _, t := range [][]Variant{variants, sm90aVariants, ladderVariants} {
		for _, v := range t {
			w := v.Key
			w.HeadDim = k.HeadDim
			if w == k && !slices.Contains(ds, v.HeadDim) {
				ds = append(ds, v.HeadDim)
			}
		}
	}
	slices.Sort(ds)
	return ds
}

// Variants returns a copy of the shipped table (the family images: both paths,
// causal and not).
func Variants() []Variant { return append([]Variant(nil), variants...) }

// LadderVariants returns a copy of the ladder's kernels (rungs 1-4).
func LadderVariants() []Variant { return append([]Variant(nil), ladderVariants...) }
