//go:build goflash_nogpu

package kernels

// Embedded reports whether this build holds the kernel images: false under
// the goflash_nogpu tag, which embeds none, for programs that run the CPU
// backends alone (flashattn's GPU backend then refuses every call with
// flashattn.ErrNoKernels).
const Embedded = false

// The images are empty under goflash_nogpu (images.go says what they hold
// in other builds): Image.Bytes and Image.SM75PTX return nil.
var (
	fwdFatbin, fwdPTX75, bwdFatbin, bwdPTX75             []byte
	decodeFatbin, decodePTX75, ladderFatbin, ladderPTX75 []byte
	SM90ACubin                                           []byte
)
