// Package flashattn is exact attention, softmax(scale·Q·Kᵀ)·V, computed
// as FlashAttention-2 does it: in tiles, with the online softmax, keeping
// only the log-sum-exp L of each row for the backward pass.
//
// The same calls run on an NVIDIA GPU, through GoFlash's own CUDA kernels
// (Turing sm_75 to Hopper sm_90, fp16 in with fp32 accumulation, bf16 on
// sm_80 and newer; embedded in the package and called through the driver
// without cgo), or on the CPU in pure Go (CPUNaive, the textbook
// algorithm, and CPUFlash, the tiled one). Options.Backend Auto, the
// default, takes the GPU where one is usable; Result.Backend says which
// ran and Result.Reason why. The driver library is found by name
// (libcuda.so.1) or where Colab, Kaggle and containers keep it; the
// environment variable GOFLASH_LIBCUDA names its path elsewhere.
//
// Entry points:
//   - Forward and Backward: tensors of shape (B, N, H, D), BSHD with
//     explicit strides (Tensor), GQA when k and v have fewer heads than q;
//   - ForwardVarlen and BackwardVarlen: sequences packed without padding
//     (Varlen's cumulative lengths, as FA2's varlen calls);
//   - ForwardKVCache and ForwardKVCacheAppend: decode against a key/value
//     cache, contiguous or paged (KVCache), split over the cache on the GPU;
//   - OpenDevice and Device: tensors that stay on the GPU (DeviceTensor:
//     Upload, UploadAs for bf16), the calls above on them, what a device
//     answers about each call, named by an Op (SupportedHeadDims, Kernels,
//     Bench), and raw device pointers and streams for other libraries'
//     memory (NewRawForward, NewRawBackward). The kernel tables
//     (KernelTable, BackwardKernelTable) need no GPU.
//
// Options adds the causal mask, a sliding window, softcap and ALiBi; every
// *Context variant stops early once its context is done. Bad input is a
// typed error, never a panic: *ShapeError, *DataError, *OptionError,
// *UnsupportedError (a case a backend does not run), *MemoryError (beyond
// HostMemoryLimit), *CacheFullError and *ReadOnlyCacheError (an append the
// cache cannot take), and ErrNoGPU, ErrDeviceClosed, ErrOutOfMemory,
// ErrContextLost, ErrFreed from the GPU.
//
// NaN and Inf inputs. On the CPU they are computed, by one rule: a NaN or
// an Inf that a row reaches (an element of its q row, or of the k or v row
// of a key the causal mask or window lets it see) makes that row NaN,
// output and LSE, whatever that key's softmax weight. A V value whose
// weight rounds to 0 in float32 counts (float64 and PyTorch carry its NaN
// too), and so does an Inf that only makes a score -Inf or that a softcap
// bounds (tanh(Inf) = 1), which evaluating the formula would drop or
// bound. A key the mask hides is not reached, and a row that sees no key
// has output 0 and LSE -Inf as always. A row whose dot product q·k, or
// whose score (scaled, capped, biased), overflows float32 is NaN too: the
// backends compute in float32, as the GPU kernels do. Backward refuses a NaN LSE (*DataError).
// Both CPU backends scan the inputs for non-finite values once per call.
// On the GPU they are refused: the uploads take only values the element
// type holds (fp16: finite, |x| < 65520; bf16: finite), so with Backend GPU
// a NaN or Inf is a *DataError naming the element, and Auto runs the call
// on the CPU and says why in Result.Reason. Bits written to device memory
// directly (DeviceTensor.Ptr, the raw-pointer API) skip that check, and a
// NaN or Inf there makes NaN rows; with packed sequences on an H100/H200,
// one in the values of a sequence's first keys can also make the sequence
// before it NaN (the Hopper kernel reads its last key block whole and
// weighs the keys past the sequence's end by 0, and 0·Inf is NaN).
//
// Package attntest is the conformance suite every backend passes, against
// a float64 reference. The repository's README and tutorial/ explain the
// algorithm and what the kernels measure.
package flashattn
