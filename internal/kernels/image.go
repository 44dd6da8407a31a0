package kernels

import "strings"

// Image is one embedded kernel module. Each kernel family is its own
// translation unit (kernels/<family>.cu) built into its own fatbin, so a
// change to one family's source leaves the other families' images
// byte-identical, and a program loads only the families it runs.
type Image int

const (
	ImageFwd    Image = iota // fa2_fwd.fatbin: the forward, its modified and varlen kernels
	ImageBwd                 // fa2_bwd.fatbin: every backward pass
	ImageDecode              // fa2_decode.fatbin: the KV-cache decode
	ImageLadder              // fa2_ladder.fatbin: the kernel ladder's rungs 1-4
	ImageSM90A               // fa2_sm90a.cubin: the Hopper forward and backward (SM90ACubin)
	NumImages                // the number of images
)

// imageNames are the families' names, as in their files' names.
var imageNames = [NumImages]string{"fwd", "bwd", "decode", "ladder", "sm90a"}

func (im Image) String() string {
	if im < 0 || im >= NumImages {
		return "image?"
	}
	return imageNames[im]
}

// File is the image's file in internal/kernels: fa2_<family>.fatbin, or
// fa2_sm90a.cubin.
func (im Image) File() string {
	if im == ImageSM90A {
		return "fa2_sm90a.cubin"
	}
	return "fa2_" + im.String() + ".fatbin"
}

// PTX75File is the file of the image's Turing PTX, fa2_<family>_ptx75.fatbin;
// "" for ImageSM90A, which has none.
func (im Image) PTX75File() string {
	if im == ImageSM90A || im < 0 || im >= NumImages {
		return ""
	}
	return "fa2_" + im.String() + "_ptx75.fatbin"
}

// Bytes returns the embedded image, for cuModuleLoadDataEx (internal/cuda):
// a family fatbin holds SASS for sm_75, sm_80, sm_86, sm_89 and sm_90 and PTX
// for compute_75 and compute_80 (newer GPUs JIT the compute_80 PTX) of every
// symbol of the family, every image compressed (the driver inflates them at
// load); ImageSM90A is SM90ACubin. Empty under goflash_nogpu.
func (im Image) Bytes() []byte {
	switch im {
	case ImageFwd:
		return fwdFatbin
	case ImageBwd:
		return bwdFatbin
	case ImageDecode:
		return decodeFatbin
	case ImageLadder:
		return ladderFatbin
	case ImageSM90A:
		return SM90ACubin
	}
	return nil
}

// SM75PTX returns a fatbin holding one image, the compressed compute_75 PTX
// of the family's Arch 75 (Turing path) kernels alone, and for ImageLadder
// of every rung (their names: resources.md's "Turing PTX entries"). Loading
// it instead of Bytes on a newer GPU makes the driver JIT-compile the Turing
// code for that GPU, so the sm_75 path can be tested anywhere. nil for
// ImageSM90A; empty under goflash_nogpu.
func (im Image) SM75PTX() []byte {
	switch im {
	case ImageFwd:
		return fwdPTX75
	case ImageBwd:
		return bwdPTX75
	case ImageDecode:
		return decodePTX75
	case ImageLadder:
		return ladderPTX75
	}
	return nil
}

// CUDA is the CUDA release whose nvcc built the image: FatbinCUDA, or
// SM90ACubinCUDA for ImageSM90A.
func (im Image) CUDA() string {
	if im == ImageSM90A {
		return SM90ACubinCUDA
	}
	return FatbinCUDA
}

// ImageOf returns the image that holds the kernel of a symbol, by its
// family's prefix: fa2_fwd_sm90a_* and fa2_bwd_*_sm90a_* (ImageSM90A),
// fa2_fwd_* (ImageFwd), fa2_bwd_* (ImageBwd), fa2_decode_* (ImageDecode), fa2_ladder*
// (ImageLadder). ok is false for a symbol of no family.
func ImageOf(symbol string) (im Image, ok bool) {
	if strings.HasPrefix(symbol, "fa2_bwd_") && strings.Contains(symbol, "_sm90a_") {
		return ImageSM90A, true
	}
	for _, f := range []struct {
		prefix string
		im     Image
	}{
		{"fa2_fwd_sm90a_", ImageSM90A}, // before fa2_fwd_
		{"fa2_fwd_", ImageFwd},
		{"fa2_bwd_", ImageBwd},
		{"fa2_decode_", ImageDecode},
		{"fa2_ladder", ImageLadder},
	} {
		if strings.HasPrefix(symbol, f.prefix) {
			return f.im, true
		}
	}
	return 0, false
}
