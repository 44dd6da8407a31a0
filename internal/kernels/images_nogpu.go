//go:build goflash_nogpu

package kernels

// Embedded reports whether this build holds the kernel images: false under
// the goflash_nogpu tag, which embeds none, for programs that run the CPU
// backends alone (flashattn's GPU backend then refuses every call with
// flashattn.ErrNoKernels).
const Embedded = false

// Fatbin, SM75PTX and SM90ACubin are empty under goflash_nogpu (images.go
// says what they hold in other builds).
var Fatbin, SM75PTX, SM90ACubin []byte
