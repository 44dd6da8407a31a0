package kernels

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
