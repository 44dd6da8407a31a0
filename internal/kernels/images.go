//go:build !goflash_nogpu

package kernels

import _ "embed"

// Embedded reports whether this build holds the kernel images: true unless
// built with the goflash_nogpu tag.
const Embedded = true

// Fatbin holds SASS for sm_75, sm_80, sm_86, sm_89 and sm_90 and PTX for
// compute_75 and compute_80 (newer GPUs JIT the compute_80 PTX) of every
// symbol in the Variant table, every image compressed (the driver inflates
// them at load); load it with cuModuleLoadDataEx (internal/cuda).
//
//go:embed fa2.fatbin
var Fatbin []byte

// SM75PTX is a fatbin holding one image, the compressed compute_75 PTX of the
// Arch 75 (Turing path) kernels alone (their names: resources.md's "Turing PTX
// entries"). Loading it instead of Fatbin on a newer GPU makes the driver
// JIT-compile the Turing code for that GPU, so the sm_75 path can be tested
// anywhere.
//
//go:embed fa2_sm75.fatbin
var SM75PTX []byte

// SM90ACubin is the Hopper forward (sm90aVariants, kernels/fa2_sm90a.cu):
// a cubin of SASS for sm_90a alone, built by nvcc 12.4 (wgmma and TMA), so it
// loads on compute capability 9.0 devices only (H100, H200), as a module of
// its own beside Fatbin. Its kernels take Sm90FwdArgs.
//
//go:embed fa2_sm90a.cubin
var SM90ACubin []byte
