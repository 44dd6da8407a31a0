//go:build !goflash_nogpu

package kernels

import _ "embed"

// Embedded reports whether this build holds the kernel images: true unless
// built with the goflash_nogpu tag.
const Embedded = true

// The family images (Image.Bytes, Image.SM75PTX say what they hold).
var (
	//go:embed fa2_fwd.fatbin
	fwdFatbin []byte
	//go:embed fa2_fwd_ptx75.fatbin
	fwdPTX75 []byte
	//go:embed fa2_bwd.fatbin
	bwdFatbin []byte
	//go:embed fa2_bwd_ptx75.fatbin
	bwdPTX75 []byte
	//go:embed fa2_decode.fatbin
	decodeFatbin []byte
	//go:embed fa2_decode_ptx75.fatbin
	decodePTX75 []byte
	//go:embed fa2_ladder.fatbin
	ladderFatbin []byte
	//go:embed fa2_ladder_ptx75.fatbin
	ladderPTX75 []byte
)

// SM90ACubin is the Hopper forward and backward (ImageSM90A: sm90aVariants,
// kernels/fa2_sm90a.cu): a cubin of SASS for sm_90a alone, built by nvcc 12.4
// (wgmma and TMA), so it loads on compute capability 9.0 devices only (H100,
// H200), as a module of its own beside the family fatbins. Its forwards take
// Sm90FwdArgs, its backward kernels Sm90BwdArgs.
//
//go:embed fa2_sm90a.cubin
var SM90ACubin []byte
