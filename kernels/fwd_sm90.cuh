// fwd_sm90.cuh: the Hopper forward (sm_90a): FA3's structure, warp
// specialisation with TMA loads and wgmma, on the tile of traits.cuh's Tile90.
//
// One CTA = one producer warpgroup and T::kConsumers consumer warpgroups. A
// work tile is Br = 64 x kConsumers query rows of one (batch, head), which
// walk the Tc = ceil(Nk/Bc) key blocks (causal: up to the last its rows see).
// Persistent: the host launches one CTA per SM (fewer if there are fewer
// tiles) and each walks its share of the Tr x B x Hq tiles (tile_order), so
// the next tile's Q and first K/V load while the last one's P V and O store
// run, and the fixed cost of a CTA is paid once per SM, not once per tile.
//   producer: gives its registers away (setmaxnreg), then one thread issues
//     every load as a TMA bulk tensor copy (tensor maps in the kernel's
//     parameter, Sm90FwdArgs, made by the host) into the 128-byte swizzled
//     layout the wgmma descriptors read: a tile's Q, then its K_n and V_n into
//     kStages stages (a ring over the CTA's tiles). Per stage and tensor a
//     "full" mbarrier (the producer's expect_tx, completed by the copy's bytes)
//     and an "empty" one (every consumer thread arrives once it no longer
//     reads the tile), so K_n is refilled as soon as S_n is done, V_n after its
//     P V, and Q after the tile's last S. Rows past Nq / Nk come zero-filled.
//   consumers: 64 query rows each (wgmma's M). Per step n, FA3's
//     intra-warpgroup overlap: issue S_n = Q K_n^T, rescale O by P_{n-1}'s
//     exp2((m_old - m_new) * scale_log2), issue O += P_{n-1} V_{n-1}, wait for
//     S_n only, mask and online softmax on S_n (m, l) while the P V GEMM runs
//     (pinned there: pin_before_wait), then wait for it and pack P_n (16-bit) as
//     the next P V's A operand in registers (the accumulator layout per warp is
//     mma.sync's C layout, so FA2's S -> P register reuse carries over). Steps
//     whose block needs no mask for any of the consumer's rows run without
//     the mask code. A tile without the overlap (Tile90::kOverlap false)
//     waits for each P V before it issues the next S (step_seq). The softcap
//     and ALiBi kernels with the overlap add FA3's ping-pong: the consumers
//     take turns (named barriers, tma.cuh's turn_wait / turn_pass) to issue a
//     step's two GEMMs.
// Causal is bottom-right aligned: row i sees keys j <= i + Nk - Nq; rows that
// see no key get O = 0, L = -inf.
// kMod (fa2_fwd_sm90a_d{D}_mod[_cap][_alibi], on Sm90Traits<D>::mod's tile):
// a sliding window, softcap and ALiBi from FwdParams, as the sm_80 path's
// modified forward defines them (mask.cuh's ScoreMods, applied to S_n before
// the softmax, which then runs in its units): a tile walks the key blocks of
// its rows' windows (mask.cuh's window_blocks; causal is the window's right
// edge 0), the blocks inside every row's window of a consumer without the
// element mask. ALiBi without the softcap adds its column term as one more
// k16 step of S's GEMM (kSide).
//
// E is the element type of Q, K, V, O and P: __half, or __nv_bfloat16 (the
// fa2_fwd_sm90a_d{D}_bf16* twins); only wgmma's input type and the packing of
// P, O and the ALiBi operand differ (wgmma.cuh).
// kVarlen (fa2_fwd_sm90a_d{D}[_bf16][_causal]_varlen, plain and causal only):
// sequence b of the packed (1, total, H, D) tensors (FwdParams'
// cumulative lengths), each its own bottom-right causal problem; the tile
// order gives every sequence the longest one's Tr tiles per head (those past
// its rows are skipped). TMA reads rows and keys past a sequence's end from
// the next one: the mask gives those keys P = 0, and rows past Nq are not
// stored. The modified forward on packed sequences runs the sm_80 path.
// Measured on the H200 and H100, and what was tried: docs/kernels.md.
#pragma once
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "mask.cuh"
#include "mma.cuh"
#include "params.cuh"
#include "tma.cuh"
#include "traits.cuh"
#include "wgmma.cuh"

namespace sm90 {

// x rounded to nearest (even) in E, as a float: the hi of a hi + lo split.
template <class E>
__device__ __forceinline__ float round_to(float x) {
  if constexpr (std::is_same<E, __nv_bfloat16>::value) return __bfloat162float(__float2bfloat16_rn(x));
  else return __half2float(__float2half_rn(x));
}

// The work tiles in the order the CTAs take them: CTA k of G takes
// positions k, k + G, ... (round r: position r G + k). Without a mask every
// tile has the same work, (b, h) slowest, so the CTAs running together share
// K and V. Causal tiles have unequal work (the last query blocks see the
// most keys): they come in groups of `group` (b, h) pairs whose K and V fit
// in kL2Bytes of L2, each group heaviest query block first, (b, h) fastest,
// its rounds in snake order (odd rounds from the other end: k, 2G - 1 - k,
// 2G + k, ...), so every CTA's tiles of a group add up to about the same
// work; the CTAs that take a group's last, partial round rotate from group to
// group. (A plain stride aliases with Tr: at N 16k the first CTAs take only
// the heaviest tiles, 31% slower at D128 causal, H200;
// kernels/dev/tile_order_check.cu checks that every tile is taken once and
// prints each shape's balance.)
template <class T, bool kCausal, int kMod, bool kVarlen = false>
struct TileOrder {
  static constexpr bool kUnequal = kCausal || kMod;  // tiles of unequal work (a mask)
  static constexpr int64_t kL2Bytes = int64_t{16} << 20;  // of the H100/H200's 50 MiB
  struct Tile {
    int m0, b, h, n_begin, n_end;  // first query row, batch, head; the key blocks its rows see
    int nq, nk, q0, k0;            // kVarlen: sequence b's rows and keys, its first row of q and of k
  };
  const FwdParams& p;
  int tr, bhs, tiles, stride;
  int group, per_group, rounds;  // (b, h) pairs per group, rounds of a whole group, rounds
  __host__ __device__ TileOrder(const FwdParams& p_, int stride_) : p(p_), stride(stride_) {
    // kVarlen: every sequence has the longest one's Tr tiles per head; those
    // past its rows are empty.
    tr = ((kVarlen ? p.max_nq : p.nq) + T::kBr - 1) / T::kBr, bhs = (kVarlen ? p.seqs : p.b) * p.hq, tiles = tr * bhs;
    const int64_t kv = int64_t{4} * T::kD * max(kVarlen ? p.nk / max(p.seqs, 1) : p.nk, 1);  // K and V bytes of one (b, h)
    group = kUnequal ? static_cast<int>(max(int64_t{1}, min(int64_t{bhs}, kL2Bytes / kv))) : bhs;
    per_group = (group * tr + stride - 1) / stride;
    const int groups = (bhs + group - 1) / group, last = bhs - (groups - 1) * group;
    rounds = (groups - 1) * per_group + (last * tr + stride - 1) / stride;
  }
  // The position CTA k takes in round r, or -1: none.
  __host__ __device__ int position(int k, int r) const {
    if (!kUnequal) return r * stride + k < tiles ? r * stride + k : -1;
    const int gi = r / per_group, rl = r - gi * per_group, size = min(group, bhs - gi * group);
    const int kr = (k + gi * (group * tr % stride)) % stride;  // the partial rounds rotate
    const int in = rl * stride + ((rl & 1) ? stride - 1 - kr : kr);
    return in < size * tr ? gi * group * tr + in : -1;
  }
  __host__ __device__ Tile at(int pos) const {
    int bh, mb;
    if (kUnequal) {
      const int gi = pos / (group * tr), in = pos - gi * group * tr, size = min(group, bhs - gi * group);
      mb = tr - 1 - in / size, bh = gi * group + in % size;
    } else {
      bh = pos / tr, mb = pos % tr;
    }
    Tile x{mb * T::kBr, bh / p.hq, bh % p.hq, 0, (p.nk + T::kBc - 1) / T::kBc, p.nq, p.nk, 0, 0};
    if constexpr (kVarlen) {  // a tile past its sequence's rows has no key block
      x.q0 = p.cu_seqlens_q[x.b], x.k0 = p.cu_seqlens_k[x.b];
      x.nq = p.cu_seqlens_q[x.b + 1] - x.q0, x.nk = p.cu_seqlens_k[x.b + 1] - x.k0;
      x.n_end = x.m0 < x.nq ? (x.nk + T::kBc - 1) / T::kBc : 0;
    }
    if (kMod) {  // the window (causal is its right edge 0): mask.cuh's blocks of the tile's rows
      const fa2::WindowBlocks wb = fa2::window_blocks<T::kBr, T::kBc>(x.m0, p.nq, p.nk, p.window_left, p.window_right);
      x.n_begin = wb.n_begin, x.n_end = wb.n_end;
    } else if (kCausal) {
      const int last = kVarlen ? x.m0 + T::kBr - 1 + x.nk - x.nq : x.m0 + T::kBr - 1 + p.nk - p.nq;  // the last key this tile's rows see
      x.n_end = last < 0 ? 0 : min(x.n_end, last / T::kBc + 1);
    }
    return x;
  }
};

template <class T, bool kCausal, int kMod = 0, class E = __half, bool kVarlen = false>
__device__ __forceinline__ void fwd_kernel(const Sm90FwdArgs& a) {
  static_assert(!(kCausal && kMod), "the modified kernel takes causal as window right 0");
  static_assert(!(kVarlen && kMod), "packed sequences with modifiers run the sm_80 path");
  constexpr bool kCap = kMod & fa2::kModCap, kALiBi = kMod & fa2::kModALiBi;
  // ALiBi without the softcap (kSide; mask.cuh's sm90_alibi_gemm, which
  // tiles.cu's shared memory sizes read too): on a clean block wholly on one
  // side of the consumer's diagonal, mask.cuh's side form (the row term
  // carried in m, as the sm_80 kernels do), its column term
  // side*alibi*(j - col0) out of one more k16 step of S's GEMM: A (64 x 16,
  // side*alibi as two E halves in columns 0-1 for side +1, 16-17 for
  // side -1) times B^T (Bc x 16, j - col0 in the same columns; other blocks
  // take the zero columns 32-47), and the block's constant
  // side*alibi*(col0 - P) in the softmax's max (cn): no per-score op.
  // Tile90's kBias* bytes hold A (per consumer, rewritten per tile for its
  // head) and B (set once). A slope past the halves' range (|alibi| >= 2^15)
  // takes apply_side's FADD per score. H200, N 8192, against apply_side:
  // D128 +3% (causal +3%), D64 +3% (+2%) (the extra k16 step is 1/16 of the
  // GEMMs at D128, 1/8 at D64).
  constexpr bool kSide = fa2::sm90_alibi_gemm(kMod);
  // exp2 as one MUFU op (ex2.approx.ftz, mma.cuh's exp2_approx; P's values
  // under 2^-126 flush to 0: beside the row's largest term, 1, they vanish in
  // the fp32 sums), not exp2f, whose
  // denormal fix-up (FSETP, two FMULs) is 3 of the ~8 instructions per
  // score: D64 +7-12% (H200). Except in the D128 softcap + ALiBi kernel:
  // there the shorter code spilled 40 B (nvcc 12.4).
  constexpr bool kEx2Ftz = !(kCap && kALiBi && T::kD >= 128);
  auto ex2 = [](float x) { return kEx2Ftz ? fa2::exp2_approx(x) : exp2f(x); };
  // FA3's ping-pong (step, below) in the overlapped softcap and ALiBi kernels
  // (D128): the consumers take turns to issue a step's S and P V, so one's
  // softmax runs under the other's GEMMs. H200, N 8192, against the overlap
  // alone: ALiBi +2-4% (causal +4%), softcap + ALiBi +5%, softcap +3-4%
  // (causal +4%; with kUniformWg, without which it cost 3%). Not in the
  // others: a window -2%, the plain D64 / D128 kernels -6-15%.
  constexpr bool kPingPong = (kALiBi || kCap) && T::kOverlap;
  static_assert(!(kPingPong && kCausal), "the causal tail's steps take no turns");
  constexpr int kQBlock = 64 * 128;      // bytes of one 64-column block of a consumer's Q
  constexpr int kKVBlock = T::kBc * 128;  // bytes of one 64-column block of K_n or V_n
  const FwdParams& p = a.p;
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* sQ = smem;                                // consumer c's rows at sQ + c * kQTile
  unsigned char* sK = smem + T::kConsumers * T::kQTile;   // stage st at sK + st * kKVTile
  unsigned char* sV = sK + T::kStages * T::kKVTile;
  uint64_t* fullQ = reinterpret_cast<uint64_t*>(smem + T::kBarOff);
  uint64_t* fullK = fullQ + 1;
  uint64_t* fullV = fullK + T::kStages;
  uint64_t* emptyK = fullV + T::kStages;
  uint64_t* emptyV = emptyK + T::kStages;
  float* pin = reinterpret_cast<float*>(smem + T::kPinOff);  // written, never read
  uint64_t* emptyQ = emptyV + T::kStages;
  // The warpgroup index broadcast from lane 0 (as CUTLASS's
  // canonical_warp_group_idx) is warp-uniform to ptxas, so the consumer's
  // rows, block bounds, stage indices and wgmma descriptors stay on the
  // uniform datapath instead of per-thread registers moved (R2UR) before each
  // wgmma. H200, N 8192, against per-thread: causal D64 501 TFLOP/s against
  // 439, D128 652 against 607; ALiBi D128 622 against 570, D64 488 against
  // 433; a window past every key D128 660 against 617. Not in the non-causal
  // plain kernels, already uniform (0.5-1% slower with it).
  constexpr bool kUniformWg = kCausal || kMod;
  const int t = threadIdx.x, wg = kUniformWg ? __shfl_sync(0xffffffff, t / 128, 0) : t / 128;
  // The swizzle is on address bits 4-9: every tile must start 1024-aligned.
  if (smem_u32(smem) % 1024 != 0) __trap();
  unsigned char* sAb = smem + T::kBiasOff;  // kSide: consumer c's A at sAb + c * kBiasA
  unsigned char* sBb = sAb + T::kConsumers * T::kBiasA;
  if constexpr (kSide) {  // A zero; B's row r: r in columns 0-1 and 16-17 (16-byte chunks 0 and 2)
    constexpr int kA = T::kConsumers * T::kBiasA, kChunks = (kA + T::kBiasB) / 16;
    for (int i = t; i < kChunks; i += T::kThreads) {
      uint4 v = {0u, 0u, 0u, 0u};
      const int off = 16 * i - kA, r = off / 128, k = ((off % 128) / 16) ^ (r % 8);
      if (off >= 0 && (k == 0 || k == 2)) v.x = pack<E>(float(r), float(r));
      *reinterpret_cast<uint4*>(sAb + 16 * i) = v;
    }
    fence_proxy_async();
  }
  const TileOrder<T, kCausal, kMod, kVarlen> order(p, gridDim.x);
  const int first = blockIdx.x;
  // The tile's Nq and Nk, and shift: causal row i sees keys <= i + shift.
  // Dense, the call's; kVarlen, the tile's sequence's (set per tile, below).
  int vnq = 0, vnk = 0;
  auto NQ = [&]() { if constexpr (kVarlen) return vnq; else return p.nq; };
  auto NK = [&]() { if constexpr (kVarlen) return vnk; else return p.nk; };
  const int dense_shift = p.nk - p.nq;
  auto SH = [&]() { if constexpr (kVarlen) return vnk - vnq; else return dense_shift; };
  if (t == 0) {
    mbar_init(fullQ, 1);
    mbar_init(emptyQ, T::kConsumerThreads);
    for (int st = 0; st < T::kStages; ++st) {
      mbar_init(fullK + st, 1);
      mbar_init(fullV + st, 1);
      mbar_init(emptyK + st, T::kConsumerThreads);
      mbar_init(emptyV + st, T::kConsumerThreads);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {  // producer
    regs_dec<T::kProducerRegs>();
    if constexpr (kPingPong) turn_first();  // consumer 0 takes the first turn
    if (t != 0) return;
    int g = 0, qi = 0;  // K/V blocks and Q tiles loaded so far (their stages and phases)
    for (int r = 0; r < order.rounds; ++r) {
      const int pos = order.position(first, r);
      if (pos < 0) continue;
      const auto x = order.at(pos);
      if (x.n_end <= x.n_begin) continue;
      const int hk = x.h / (p.hq / p.hkv);
      if (qi > 0) mbar_wait(emptyQ, (qi - 1) & 1);  // the last tile's Q no longer read
      ++qi;
      mbar_expect_tx(fullQ, T::kConsumers * T::kQTile);
      for (int c = 0; c < T::kConsumers; ++c)
        for (int xb = 0; xb < T::kD / T::kBox; ++xb)
          tma_load(sQ + c * T::kQTile + xb * kQBlock, a.q_map, fullQ, xb * T::kBox, x.q0 + x.m0 + 64 * c, x.h, kVarlen ? 0 : x.b);
      for (int n = x.n_begin; n < x.n_end; ++n, ++g) {
        const int st = g % T::kStages;
        const uint32_t ph = (g / T::kStages) & 1;  // the stage's use g / kStages; its release was the use before
        if (g >= T::kStages) mbar_wait(emptyK + st, ph ^ 1);
        mbar_expect_tx(fullK + st, T::kKVTile);
        for (int xb = 0; xb < T::kD / T::kBox; ++xb)
          tma_load(sK + st * T::kKVTile + xb * kKVBlock, a.k_map, fullK + st, xb * T::kBox, x.k0 + n * T::kBc, hk, kVarlen ? 0 : x.b);
        if (g >= T::kStages) mbar_wait(emptyV + st, ph ^ 1);
        mbar_expect_tx(fullV + st, T::kKVTile);
        for (int xb = 0; xb < T::kD / T::kBox; ++xb)
          tma_load(sV + st * T::kKVTile + xb * kKVBlock, a.v_map, fullV + st, xb * T::kBox, x.k0 + n * T::kBc, hk, kVarlen ? 0 : x.b);
      }
    }
    return;
  }

  regs_inc<T::kConsumerRegs>();
  // (Shifts and masks, not signed division: cheap enough for ptxas to
  // recompute rather than spill across the tile loop.)
  const int c = wg - 1, tc = t & 127, w = tc >> 5, g8 = (tc >> 2) & 7, c2 = (tc & 3) << 1;
  const unsigned char* q = sQ + c * T::kQTile;
  // K/V blocks consumed so far (their stages and phases) in the low bits; the
  // phase of the next Q tile in bit kQPhase, which no stage index or phase
  // reads as long as kStages is a power of two (one register fewer: D64
  // causal spilled the Q tile count).
  constexpr int kQPhase = 30;
  // kSide: bit kBiasOk of g says the tile's head's |slope| is under 2^15,
  // which A's fp16 hi half holds (for bf16 a conservative bound); else its
  // blocks take apply_side. Also a register fewer.
  constexpr int kBiasOk = 29;
  static_assert((T::kStages & (T::kStages - 1)) == 0, "the Q phase bit needs kStages a power of two");
  int g = 0;
  auto bias_ok = [&]() { return ((g >> kBiasOk) & 1) != 0; };
  int rowc = 0, row0 = 0;  // this consumer's first row, this thread's rows: row0 and row0 + 8
  int nb = 0;              // the tile's first key block: step n of the tile is key block nb + n
  fa2::ScoreMods mods{};   // kMod: the head's window, softcap and ALiBi (scores in mods.unit)
  int side = 0;            // kSide: the form m is in (ScoreMods::apply_side)
  // Accumulators in mma's C layout per warp: element 4 i + 2 hh + e is row
  // row0 + 8 hh, column 8 i + c2 + e.
  float o[T::kD / 2], s[T::kBc / 2], m[2], l[2], alpha[2];
  uint32_t pf[T::kBc / 4];  // P (E pairs) of the step whose P V is next: wgmma's A fragments
  // Without the overlap, S's old values are dead when S_n is issued; S's
  // first k16 wgmma can take them write-only (wgmma_ss_init), freeing S's
  // registers under P V. Not in the ALiBi kernel whose S takes the bias k16
  // step (kSide): there it gains nothing. Softcap: a 4-byte spill gone, D64
  // 6% faster; a window alone: D64 +3% (H200, N 8192).
  constexpr bool kSInit = !T::kOverlap && !kSide;

  auto s_gemm = [&](int n, bool clean) {  // issue S = Q K_n^T; not waited for (clean: the block has no mask)
    const unsigned char* k = sK + ((g + n) % T::kStages) * T::kKVTile;
    if constexpr (!kSInit) fence_regs(s);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < T::kD / 16; ++j) {  // column block j / 4, k16 step j % 4 (32 bytes each)
      const uint64_t da = desc(q + (j / 4) * kQBlock + (j % 4) * 32, 16, 1024);
      const uint64_t db = desc(k + (j / 4) * kKVBlock + (j % 4) * 32, 16, 1024);
      if constexpr (kSInit) {
        if (j == 0) wgmma_ss_init<E>(s, da, db);
        else wgmma_ss<E>(s, da, db, 1);
      } else {
        wgmma_ss<E>(s, da, db, j > 0);
      }
    }
    if constexpr (kSide) {  // the ALiBi column term of the block's side (softmax's cn)
      int so = 64;  // A and B columns from byte 0: side +1; 32: side -1; 64: zeros
      if (clean && bias_ok()) {
        const int sd = mods.template alibi_side<T::kBc>(rowc, min(rowc + 63, p.nq - 1), (nb + n) * T::kBc);
        so = sd > 0 ? 0 : sd < 0 ? 32 : 64;
      }
      wgmma_ss<E>(s, desc(sAb + c * T::kBiasA + so, 16, 1024), desc(sBb + so, 16, 1024), 1);
    }
    wgmma_commit();
    fence_regs(s);
  };
  auto pv_gemm = [&](int n) {  // issue O += P V_n; not waited for
    const unsigned char* v = sV + ((g + n) % T::kStages) * T::kKVTile;
    fence_regs(o);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < T::kBc / 16; ++j) {  // keys 16 j .. 16 j + 15 (16 rows of 128 bytes)
      const uint32_t af[4] = {pf[4 * j], pf[4 * j + 1], pf[4 * j + 2], pf[4 * j + 3]};
      wgmma_rs<E>(o, af, desc(v + j * 16 * 128, kKVBlock, 1024));
    }
    wgmma_commit();
    fence_regs(o);
  };
  auto to_side = [&](int to) {  // kSide: m from side's form to to's (l and O stay)
    if (to != side) mods.template shift_side<1>(reinterpret_cast<float(&)[1][2]>(m), side, to, 16 * w, tc & 31);
    side = to;
  };
  // Mask (kMasked: the blocks that reach past Nk or, causal, past a row's
  // diagonal; kMod: outside a row's window) and online softmax on S_n in
  // place: s becomes unnormalised P_n; m, l updated, alpha the factor O still
  // owes. kMod: the scores become mask.cuh's ScoreMods' first (the
  // accumulator's per-warp layout is the [1][Bc/8][4] of its mma tiles).
  auto softmax = [&](int n, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    const int col0 = (nb + n) * T::kBc;
    float cn = 0.f;  // kSide: the side form's block constant side*alibi*(col0 - P), not in S
    if constexpr (kMod) {
      auto& s3 = reinterpret_cast<float(&)[1][T::kBc / 8][4]>(s);
      if (kSide && !kMasked) {  // a column bias unless the block crosses the diagonal
        to_side(mods.template alibi_side<T::kBc>(rowc, min(rowc + 63, p.nq - 1), col0));
        if (side != 0 && bias_ok()) cn = (side > 0 ? mods.alibi : -mods.alibi) * float(col0 - rowc - mods.off);
        else if (side != 0) mods.template apply_side<1, T::kBc / 8, false>(s3, side, rowc, col0, tc & 31);
        else mods.template apply<1, T::kBc / 8, false, false, true>(s3, rowc + 16 * w, col0, tc & 31);
      } else if (kMasked || kCap || kALiBi) {
        if (kSide) to_side(0);
        mods.template apply<1, T::kBc / 8, kMasked, kCap, kALiBi>(s3, rowc + 16 * w, col0, tc & 31);
      }
    }
    const float scale_log2 = kMod ? mods.unit_log2 : p.scale_log2;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float mo = kSide ? m[hh] - cn : m[hh];  // m in the form of S's scores
      const int row = row0 + 8 * hh;
      // The last key the row sees, relative to this thread's first column:
      // one compare with a constant per score. (Causal rows past Nq see keys
      // past Nk, which TMA filled with zeros; their outputs are not stored.)
      const int lim = (kCausal ? row + SH() : NK() - 1) - col0 - c2;
      float mx = mo;
#pragma unroll
      for (int i = 0; i < T::kBc / 8; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * i + 2 * hh + e];
          if (!kMod && kMasked && 8 * i + e > lim) x = -INFINITY;
          mx = fmaxf(mx, x);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      // A row with no key seen yet keeps m = -inf: subtract 0 so exp2 gives 0, not NaN.
      const float ms = mx == -INFINITY ? 0.f : mx * scale_log2;
      alpha[hh] = ex2(mo * scale_log2 - ms);
      m[hh] = kSide ? mx + cn : mx;
      float rs = 0.f;
#pragma unroll
      for (int i = 0; i < T::kBc / 8; ++i)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * i + 2 * hh + e];
          x = ex2(x * scale_log2 - ms);
          rs += x;
        }
      l[hh] = l[hh] * alpha[hh] + rs;  // this thread's columns; the quad's sum at the end
    }
  };
  auto rescale = [&]() {  // O owes alpha of the last softmax, before its P V accumulates
#pragma unroll
    for (int i = 0; i < T::kD / 8; ++i) {
      o[4 * i] *= alpha[0];
      o[4 * i + 1] *= alpha[0];
      o[4 * i + 2] *= alpha[1];
      o[4 * i + 3] *= alpha[1];
    }
  };
  auto pack_p = [&]() {
#pragma unroll
    for (int i = 0; i < T::kBc / 4; ++i) pf[i] = pack<E>(s[2 * i], s[2 * i + 1]);
  };
  // Step n >= 1, FA3's order: S_n issued first, so the tensor cores start it
  // while O is rescaled for P_{n-1}, whose P V is issued next and runs under
  // the softmax of S_n.
  auto step = [&](int n, int n_end, auto masked) {
    const int gn = g + n, st = gn % T::kStages, sp = (gn - 1) % T::kStages;
    if constexpr (kPingPong) {  // O rescaled and both copies waited for before the turn, which is the GEMMs' issue only
      rescale();
      mbar_wait(fullK + st, (gn / T::kStages) & 1);
      mbar_wait(fullV + sp, ((gn - 1) / T::kStages) & 1);
      turn_wait();
      s_gemm(n, !decltype(masked)::value);
      pv_gemm(n - 1);
      turn_pass<T::kConsumers>();
    } else {
      mbar_wait(fullK + st, (gn / T::kStages) & 1);
      s_gemm(n, !decltype(masked)::value);
      rescale();
      mbar_wait(fullV + sp, ((gn - 1) / T::kStages) & 1);
      pv_gemm(n - 1);
    }
    wgmma_wait<1>();  // S_n is in; P_{n-1} V_{n-1} may still run
    fence_regs(s);
    mbar_arrive(emptyK + st);
    if (n == n_end - 1) mbar_arrive(emptyQ);  // the tile's last S: Q is free for the next
    softmax(n, masked);
    // ptxas would hoist the wait above the exp2s (the empty asm fences order
    // the PTX, not its schedule): l needs every one of them, and its store
    // stays ahead of the wait, so the softmax runs under the P V GEMM.
    pin_before_wait(pin + tc + 128 * c, l[0] + l[1]);
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs(pf);  // P_{n-1} stays live up to here: the softmax must not take its registers
    mbar_arrive(emptyV + sp);
    pack_p();
  };
  // Step n >= 1 without the overlap: P_{n-1} V_{n-1} is waited for before
  // S_n is issued, so P's registers and S's are never live together (the
  // other consumers' GEMMs fill the tensor cores meanwhile).
  auto step_seq = [&](int n, int n_end, auto masked) {
    const int gn = g + n, st = gn % T::kStages, sp = (gn - 1) % T::kStages;
    rescale();
    mbar_wait(fullV + sp, ((gn - 1) / T::kStages) & 1);
    pv_gemm(n - 1);
    wgmma_wait<0>();
    fence_regs(o);
    mbar_arrive(emptyV + sp);
    mbar_wait(fullK + st, (gn / T::kStages) & 1);
    s_gemm(n, !decltype(masked)::value);
    wgmma_wait<0>();
    fence_regs(s);
    mbar_arrive(emptyK + st);
    if (n == n_end - 1) mbar_arrive(emptyQ);
    softmax(n, masked);
    pack_p();
  };
  auto any_step = [&](int n, int n_end, auto masked) {
    if constexpr (T::kOverlap) step(n, n_end, masked);
    else step_seq(n, n_end, masked);
  };

  for (int r = 0; r < order.rounds; ++r) {
    const int pos = order.position(first, r);
    if (pos < 0) continue;
    const auto x = order.at(pos);
    const int n_end = x.n_end - x.n_begin;  // the tile's steps
    nb = x.n_begin;
    if constexpr (kVarlen) vnq = x.nq, vnk = x.nk;
    rowc = x.m0 + 64 * c;
    row0 = rowc + 16 * w + g8;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    side = 0;
#pragma unroll
    for (int i = 0; i < T::kD / 2; ++i) o[i] = 0.f;
    if (kMod) mods = fa2::ScoreMods::of(p, x.h, p.nq, p.nk);
    if constexpr (kSide) {
      // A: this head's side*alibi in two E halves (hi + lo), row tc/2, side +1 / -1 by tc's parity
      const bool bg = fabsf(mods.alibi) < 32768.f;
      g = bg ? g | (1 << kBiasOk) : g & ~(1 << kBiasOk);
      const float a = bg ? ((tc & 1) ? -mods.alibi : mods.alibi) : 0.f;
      const float hi = round_to<E>(a);
      const int r = tc >> 1, k = ((tc & 1) * 2) ^ (r % 8);
      consumer_sync<T::kConsumers>(c);  // the last tile's S GEMMs are done with A
      *reinterpret_cast<uint4*>(sAb + c * T::kBiasA + r * 128 + k * 16) = uint4{pack<E>(hi, a - hi), 0u, 0u, 0u};
      fence_proxy_async();
      consumer_sync<T::kConsumers>(c);
    }
    // Causal: the steps up to this consumer's last row's diagonal (its rows
    // see no key past it; at D64's Br 192 over Bc 128 one or two of the three
    // consumers end a block before the tile does). The blocks after are
    // released unread, each once its copy has landed: an "empty" arrival
    // before that could count toward the stage's previous use.
    int n_own = n_end;
    if (kCausal) {
      const int last = rowc < NQ() ? min(rowc + 63, NQ() - 1) + SH() : -1;  // the last key its rows see
      n_own = last < 0 ? 0 : min(n_end, last / T::kBc + 1 - nb);
    }
    if (n_end > 0) {
      mbar_wait(fullQ, (g >> kQPhase) & 1);
      g ^= 1 << kQPhase;
      if (n_own == 0) mbar_arrive(emptyQ);
    }
    if (n_own > 0) {
      // Steps [n_full, n_mask) need no mask for any of this consumer's rows:
      // whole blocks of keys, all at or left of its first row's diagonal (and
      // kMod: within every row's window).
      int n_full = 0, n_mask = NK() / T::kBc;
      if (kCausal) n_mask = min(n_mask, max(rowc + SH() + 1, 0) / T::kBc);
      if (kMod) {
        const fa2::WindowBlocks wc =
            fa2::window_blocks_rows<T::kBc>(rowc, min(rowc + 63, p.nq - 1), p.nq, p.nk, p.window_left, p.window_right);
        n_full = rowc < p.nq ? wc.n_full : n_end + nb, n_mask = rowc < p.nq ? wc.n_mask : 0;
      }
      n_full -= nb, n_mask -= nb;
      using Masked = std::true_type;
      using Unmasked = std::false_type;
      mbar_wait(fullK + g % T::kStages, (g / T::kStages) & 1);
      s_gemm(0, n_full <= 0 && 0 < n_mask);
      wgmma_wait<0>();
      fence_regs(s);
      mbar_arrive(emptyK + g % T::kStages);
      if (n_own == 1) mbar_arrive(emptyQ);
      if (n_full <= 0 && 0 < n_mask) softmax(0, Unmasked{});
      else softmax(0, Masked{});
      pack_p();
      int n = 1;
      for (; n < min(n_full, n_own); ++n) any_step(n, n_own, Masked{});
      for (; n < min(n_mask, n_own); ++n) any_step(n, n_own, Unmasked{});
      for (; n < n_own; ++n) any_step(n, n_own, Masked{});
      const int nl = n_own - 1, gl = g + nl;
      rescale();
      mbar_wait(fullV + gl % T::kStages, (gl / T::kStages) & 1);
      pv_gemm(nl);
      wgmma_wait<0>();
      fence_regs(o);
      mbar_arrive(emptyV + gl % T::kStages);
    }
    if (kCausal) {
      // The tile's end again (TileOrder::at's causal n_end) from this
      // consumer's first row, behind an opaque copy so that ptxas cannot
      // keep it live across the steps (D64 spilled 8 B with n_end kept).
      int m0 = rowc - 64 * c;
      asm volatile("" : "+r"(m0));
      const int last = m0 + T::kBr - 1 + SH();
      const int e = last < 0 || (kVarlen && m0 >= NQ()) ? 0 : min((NK() + T::kBc - 1) / T::kBc, last / T::kBc + 1);
      for (int n = n_own; n < e; ++n) {
        const int gn = g + n, st = gn % T::kStages;
        const uint32_t ph = (gn / T::kStages) & 1;
        mbar_wait(fullK + st, ph);
        mbar_arrive(emptyK + st);
        mbar_wait(fullV + st, ph);
        mbar_arrive(emptyV + st);
      }
      g += e;
    } else {
      g += n_end;
    }

    if (kSide) to_side(0);  // L of the |distance| form
    // kVarlen: the sequence's rows of the packed O, and of the LSE's (Hq, total).
    E* gO = static_cast<E*>(p.o) + (kVarlen ? x.q0 * p.o_row_stride : x.b * p.o_batch_stride) + x.h * p.o_head_stride;
    float* gL = p.lse + (kVarlen ? x.h * static_cast<int64_t>(p.nq) + x.q0 : (static_cast<int64_t>(x.b) * p.hq + x.h) * p.nq);
    // kStageO: this warp's 16 rows, D / 8 16-byte chunks each, chunk k of
    // row r at k ^ (r % 8): the quad's 4-byte writes of 8 rows and the
    // 16-byte reads of a row's 8 chunks both hit 32 distinct banks.
    constexpr int kChunks = T::kD / 8, kRowBytes = 2 * T::kD;
    unsigned char* sO = smem + T::kStageOOff + (64 * c + 16 * w) * kRowBytes;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = row0 + 8 * hh;
      float sum = l[hh];
      sum += __shfl_xor_sync(0xffffffff, sum, 1);
      sum += __shfl_xor_sync(0xffffffff, sum, 2);
      if (!T::kStageO && row >= NQ()) continue;
      const bool seen = m[hh] != -INFINITY;
      const float inv = seen ? 1.f / sum : 0.f;
      const int r = g8 + 8 * hh;
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        const uint32_t v = pack<E>(o[4 * i + 2 * hh] * inv, o[4 * i + 2 * hh + 1] * inv);
        if constexpr (T::kStageO) *reinterpret_cast<uint32_t*>(sO + r * kRowBytes + 16 * (i ^ g8) + 2 * c2) = v;
        else *reinterpret_cast<uint32_t*>(gO + row * p.o_row_stride + 8 * i + c2) = v;
      }
      if (tc % 4 == 0 && row < NQ()) gL[row] = seen ? fmaf(m[hh], kMod ? mods.unit : p.scale, logf(sum)) : -INFINITY;
    }
    if constexpr (T::kStageO) {
      __syncwarp();
      const int lane = tc & 31;
#pragma unroll
      for (int j = 0; j < 16 * kChunks / 32; ++j) {
        const int idx = 32 * j + lane, r = idx / kChunks, k = idx % kChunks, row = rowc + 16 * w + r;
        if (row < NQ())
          *reinterpret_cast<uint4*>(gO + row * p.o_row_stride + 8 * k) =
              *reinterpret_cast<const uint4*>(sO + r * kRowBytes + 16 * (k ^ (r % 8)));
      }
      __syncwarp();  // read before the next tile's rows are staged
    }
  }
}

}  // namespace sm90
