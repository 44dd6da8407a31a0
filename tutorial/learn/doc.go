// Package learn is the scaffolding of the tutorial's "write it yourself"
// exercises: FlashAttention-2's tiled forward pass (chapter 4, notebook 04)
// and backward pass (chapter 5, notebook 05) on the CPU, in the paper's
// names, with the lines that make them FlashAttention left to the learner.
//
// Forward runs the loops of FA2's Algorithm 1 — query blocks of Br rows
// outside, key blocks of Bc rows inside, the causal mask, the tiles it
// skips — and calls the learner's Step for every tile (the online-softmax
// update of each row's m, l and O) and Finish at the end of every query
// block (O /= l, L = m + log l). Backward runs Algorithm 2's loops — key
// blocks outside, query blocks inside, P rebuilt from L, dP = dO V^T, D =
// rowsum(dO ∘ O) — and calls the learner's BwdStep for every tile (dS and
// the dV, dK, dQ updates).
//
// CheckForward and CheckBackward judge the learner's functions. They first
// run them on small tiles with known answers, one line of the algorithm at a
// time, so that a wrong or missing line gets a hint that names it ("row 0's
// l is 0: did you add rowsum(P) to l?"); then they run the whole loop on
// several problems (ragged blocks, Nq != Nk, causal rows that see no key,
// grouped-query heads) and hold the result to package attntest's float32
// rule against the float64 truth, and to the same margin against the
// library's own answer (flashattn.Forward with CPUNaive; flashattn.Backward
// with CPUFlash). The learner's code never crashes a check: a panic in it
// becomes a hint.
//
// The notebooks keep only the learner's functions; everything else is here,
// where go test runs it with the reference answers and with the blank stubs.
package learn
