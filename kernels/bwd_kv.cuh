// bwd_kv.cuh: the sm_80 backward's dK/dV kernel with FA2's 2-D warp layout,
// and (kDQ) FA2's single pass: the same kernel also adds dQ with fp32 atomics.
//
// A CTA owns Bc key rows of one kv head (K, V, and the dK, dV accumulators)
// and walks every Br-row query block of every query head of its GQA group.
// Per step (paper notation, products transposed so rows are keys):
//   S^T  = K Q_i^T, P^T = exp2(S^T*scale*log2e - L_i*log2e)     warps: SK keys x Warps/SK queries
//   dP^T = V dO_i^T, dS^T = P^T * (dP^T - Di)                    (same warp tiles)
//   P^T, dS^T -> shared memory (fp16)                            one barrier
//   dV += P^T dO_i,  dK += dS^T Q_i                              warps: VK keys x Warps/VK head-dim columns
//   kDQ: dQ_i = dS_i K (dS read .trans from dS^T), added by      warps: QM queries x Warps/QM columns
//        atomics into the fp32 accumulator p.dq_accum
// The three products use different warp grids, so each warp owns a slice of
// keys x columns of dK and dV instead of whole rows: the fp32 accumulators are
// split over the warps (bwd.cuh's 1-D layout holds whole D-wide rows, D/2
// registers per thread per 16 rows for each of dK and dV), and every fragment
// read from shared memory feeds several mmas. The single pass computes S and
// dP once (5 products, not 7); the order of the atomic adds is not fixed, so
// its dQ is not bit-reproducible, unless kDet fixes it (see bwd_kv_kernel: the
// deterministic backward). Without kDQ the kernel is dK/dV alone; beside
// bwd.cuh's dQ kernel it measured no faster than bwd.cuh's dK/dV kernel (D128
// 8.02 against 8.13 ms at N 8192, H200), so only kDQ ships.
//
// dq_accum ((B, Hq, Tr*Br, D) fp32, blocks in fragment order: dq_accum_index;
// kDet: then (B, Hq, Tr) int32 counters, dq_count_base; packed sequences:
// dq_accum_row's (Hq, rows, D), then one counter per Br rows, dq_counters_offset)
// is zero before the kernel (the pre kernel zeroes the floats, p.dq_accum_rows
// rows per (b, h); the counters start zero and kDet leaves them zero), scaled
// and rounded to dQ by bwd_dq_convert_kernel after it; rows that see no key
// get dQ = 0.
#pragma once
#include "bwd.cuh"

namespace fa2 {

// ldmatrix row addresses of the lane for NP chunk pairs of a column slice
// [col0, col0 + 16*NP) of a swizzled tile of D-element rows, in either lane
// order (tile_io.cuh's LdAddr). The slice depends on the warp, i.e. is known
// only at run time, so the swizzled offsets are computed once instead of per
// load (LdAddr folds them into immediates only for compile-time chunks).
template <int D, LdOrder O, int NP>
struct SliceAddr {
  uint32_t off[NP];
  __device__ __forceinline__ SliceAddr(int lane, int col0) {
    const int row = O == kRowsFirst ? (lane & 15) : ((lane & 7) | ((lane >> 4) << 3));
    const int hi = O == kRowsFirst ? (lane >> 4) : ((lane >> 3) & 1);
#pragma unroll
    for (int u = 0; u < NP; ++u) off[u] = row * D * 2 + (((col0 >> 3) + 2 * u + hi) ^ Swizzle<D>::key(row)) * 16;
  }
  // Byte address for slab row row0 (a multiple of 16: the swizzle key repeats) and pair u.
  __device__ __forceinline__ uint32_t at(uint32_t base, int row0, int u) const { return base + row0 * D * 2 + off[u]; }
};

// c += A B over k = K rows: A (MT m16 row tiles from arow of a tile of K-element
// rows at abase, non-transposed ldmatrix) times the NC columns from col0 of the
// K rows of a tile of D-element rows at bbase (.trans, as V in O += P V).
template <int Arch, int K, int D, int MT, int NC, class E>
__device__ __forceinline__ void gemm_slice(float (&c)[MT][NC / 8][4], const LdAddr<K, kRowsFirst>& la, uint32_t abase, int arow,
                                           const SliceAddr<D, kRowsFirst, NC / 16>& sb, uint32_t bbase) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) ldmatrix_x4(a[i], la.at(abase, arow + 16 * i, 2 * kk));
#pragma unroll
    for (int dd = 0; dd < NC / 16; ++dd) {
      uint32_t bv[4];
      ldmatrix_x4_trans(bv, sb.at(bbase, 16 * kk, dd));
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        mma_k16<Arch, E>(c[i][2 * dd], a[i], bv[0], bv[1]);
        mma_k16<Arch, E>(c[i][2 * dd + 1], a[i], bv[2], bv[3]);
      }
    }
  }
}

// The warp's fp32 C fragments (rows row0.., columns col0..) as E into a
// swizzled tile of R-element rows: each quad writes 16 contiguous bytes of a row.
template <int R, int MT, int NJ, class E>
__device__ __forceinline__ void store_frags(const float (&c)[MT][NJ][4], __half* s, int row0, int col0, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
      for (int j = 0; j < NJ; ++j)
        *reinterpret_cast<uint32_t*>(s + Swizzle<R>::offset(row0 + 16 * i + g + 8 * hh, (col0 >> 3) + j) + 2 * t) =
            pack2<E>(c[i][j][2 * hh], c[i][j][2 * hh + 1]);
}

// Offset of query block m0 (a multiple of Br) of (b, h) in dq_accum: (B, Hq,
// Tr*Br, D) floats, each block's Br x D in fragment order: warp w of the dQ grid
// (rows (w % QM)*QRows.., columns (w / QM)*QCols..) owns QRows*QCols floats,
// lane l's value e of m-tile i, n-tile n at ((i*QCols/8 + n)*4 + e)*32 + l.
template <class T>
__device__ __forceinline__ int64_t dq_accum_index(int b, int h, int hq, int nq, int m0) {
  const int tr = (nq + T::kBr - 1) / T::kBr;
  return ((static_cast<int64_t>(b) * hq + h) * tr * T::kBr + m0) * T::kD;
}
// The accumulator row of query block m0 of (b, h) for the kernels that take
// packed sequences (the modified single pass, the convert kernel), rows per
// slab from p.dq_accum_rows: dense (B, Hq, rows, D), rows = Tr*Br as above;
// packed (vl: b a sequence, sq its place) (Hq, rows, D), rows = total_q +
// seqs*kAccumPad, sequence b's blocks from row q0 + b*kAccumPad, so each
// sequence's padded rows fit before the next's (no prefix sum needed) and the
// memory follows the real tokens, not seqs x the longest.
template <class T>
__device__ __forceinline__ int64_t dq_accum_row(const BwdParams& p, bool vl, const Seq& sq, int b, int h, int m0) {
  static_assert(kAccumPad % T::kBr == 0, "a sequence's padded query blocks fit its kAccumPad-rounded slab");
  return vl ? static_cast<int64_t>(h) * p.dq_accum_rows + sq.q0 + static_cast<int64_t>(b) * kAccumPad + m0
            : (static_cast<int64_t>(b) * p.hq + h) * p.dq_accum_rows + m0;
}

// The deterministic single pass's counters: one int per (b, h, query block),
// after the accumulator's floats (in the same buffer, so zeroed and counted
// with it): how many key blocks have added their dQ tile so far.
template <class T>
__device__ __forceinline__ int* dq_count_base(const BwdParams& p) {
  return reinterpret_cast<int*>(p.dq_accum + dq_accum_index<T>(p.b, 0, p.hq, p.nq, 0));
}
// The modified pass's counters (dense or packed): after the floats, at this
// offset (in floats), the counter of the block at accumulator row r
// (dq_accum_row) at r / Br (blocks start at least Br rows apart; for packed
// sequences not on multiples of Br, r / Br still differs between blocks).
template <class T>
__device__ __forceinline__ int64_t dq_counters_offset(const BwdParams& p, bool vl) {
  const int64_t slabs = vl ? p.hq : static_cast<int64_t>(p.b) * p.hq;
  return slabs * p.dq_accum_rows * T::kD;
}
__device__ __forceinline__ int ld_acquire(const int* a) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(a) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(int* a, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(a), "r"(v) : "memory");
}

// kDet (with kDQ): the dQ additions in a fixed order, so dQ is bit-reproducible.
// Key block n adds its tile of query block i only after key blocks 0..n-1 did:
// a warp waits until i's counter reads n, and thread 0 publishes n+1 (release;
// the last contributor writes 0, leaving the counters zero for the next call)
// once every warp's adds were issued. Every block before n contributes to i too
// (query_begin grows with n), and waits only on a CTA earlier in the grid's
// linear order, which was dispatched before it: no deadlock.
// - Grid (B*Hkv, Tc), heads fastest: key block n of a head is dispatched about
//   a wave after n-1, which has then long added its tiles, so few adds wait
//   (key blocks fastest, the default grid, makes n wait n steps for its first
//   adds: D128 non-causal N 2048 2.93 ms against 2.65, H200).
// - Causal key blocks start at different query blocks, so they walk them last
//   to first (qblock): key block n reaches each block level with n-1, not
//   Bc/Br steps behind it (D128 det/flash at N 2048 0.87, 0.83 first to last).
// - The release goes out in the next step, after its P^T/dS^T barrier
//   (kReleaseAfterDV: after its dV product on sm_80): its fence (st.release)
//   then finds the adds acknowledged, where right after them it stalls
//   thread 0's warp, and with it the CTA, for an L2 round trip every step:
//   D128 causal N 2048 1.47 ms against 1.77 (default single pass 1.41), D64 N
//   8192 11.10 against 11.34 (H200). Not later: after the next step's dK it
//   measured 4-11% slower (with few heads, heads fastest still has a head's
//   key blocks resident together, one step apart, and they wait on it).
// - The adds come after dK (the default kernel's go between dV and dK): there
//   the wait for the predecessor overlaps all three products; between dV and
//   dK it measured 2-4% slower (H200).
//
// kMod (the fa2_bwd_dkdvq[det]_*_mod kernels, head dims whose only backward is
// this pass: FA2_BWD_KVQ_ALONE): the window, softcap and ALiBi of bwd.cuh's
// kMod, run-time flags read from BwdParams (causal is the window's right = 0),
// P and dS per score by the same mod_p_ds; a key block walks the query blocks
// whose windows show one of its keys (window_query_blocks), and with kDet the
// additions to query block i start at the first key block i sees
// (window_blocks), not at 0.
template <class T, bool kCausal, bool kDQ, class E = __half, bool kDet = false, bool kMod = false>
__device__ __forceinline__ void bwd_kv_kernel(const BwdParams& p) {
  static_assert(!kDet || kDQ, "the order concerns the dQ additions");
  static_assert(!kMod || (kDQ && !kCausal), "the modified single pass takes causal as its window");
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 890)
  // A large tile never runs on sm_86/89 (99 KiB opt-in; kernels.LargeFits),
  // and some spill there (nvcc 11.8: the ordered twins, D128's non-causal
  // grid): no code for them.
  if constexpr (T::kLarge) {
    __trap();
    return;
  }
#endif
  constexpr int A = T::kArch, D = T::kD, Bc = T::kBc, Br = T::kBr, NT = T::kThreads;
  static_assert(A == 80, "cp.async streams: sm_80 path only");
  static_assert(Br <= NT, "one thread per streamed row loads L and Di");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* smem = reinterpret_cast<__half*>(smem_raw);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  // (key block, b*Hkv + hk); unsigned as blockIdx, so the default kernel's code does not change.
  const unsigned gx = kDet ? blockIdx.y : blockIdx.x, gy = kDet ? blockIdx.x : blockIdx.y;
  const int b = gy / p.hkv, hk = gy % p.hkv;
  const int groups = p.hq / p.hkv;
  const int kb = gx;
  const int n0 = gx * Bc;
  // kMod: packed sequences at run time (varlen.cuh's varlen_call; gy's b is
  // then a sequence), kDet too. Dense or packed, the CTA's bases (where its
  // Q, dO, L/Di and accumulator rows start, its lengths) are set once in
  // shared memory and read where used, so the loop has one form for both:
  // held in registers across the loop they spilled 20-24 B (nvcc 11.8, D256,
  // sm_80 and sm_90); chosen per use between the two forms the large ordered
  // twin spilled or ran 9% slower on dense calls (H200).
  const bool vl = varlen_call<false, kMod>(p);
  __shared__ int s_seq[4];      // kMod: k0 (packed), Nq, Nk
  __shared__ int64_t s_off[7];  // kMod: Q's and dO's offsets, the first L/Di row, accumulator row, counters' offset, dK's and dV's
  if (kMod) {
    if (tid == 0) {
      const Seq sq = vl ? seq_of(p, b) : Seq{0, 0, p.nq, p.nk};
      s_seq[0] = static_cast<int>(sq.k0), s_seq[1] = sq.nq, s_seq[2] = sq.nk;
      s_off[0] = vl ? sq.q0 * p.q_row_stride : b * p.q_batch_stride;
      s_off[1] = vl ? sq.q0 * p.do_row_stride : b * p.do_batch_stride;
      s_off[2] = vl ? sq.q0 : static_cast<int64_t>(b) * p.hq * p.nq;  // row_stats' r is this + h * Nq + row
      s_off[3] = dq_accum_row<T>(p, vl, sq, b, 0, 0);                 // its row is this + h * rows + m0
      s_off[4] = dq_counters_offset<T>(p, vl);
      s_off[5] = (vl ? (sq.k0 + n0) * p.dk_row_stride : b * p.dk_batch_stride + n0 * p.dk_row_stride) + hk * p.dk_head_stride;
      s_off[6] = (vl ? (sq.k0 + n0) * p.dv_row_stride : b * p.dv_batch_stride + n0 * p.dv_row_stride) + hk * p.dv_head_stride;
    }
    __syncthreads();
  }
  auto seqv = [&](int i) { return static_cast<volatile int*>(s_seq)[i]; };
  auto offv = [&](int i) { return static_cast<volatile int64_t*>(s_off)[i]; };
  auto seq_k0 = [&] { return static_cast<int64_t>(seqv(0)); };
  auto nq = [&] { return kMod ? seqv(1) : p.nq; };
  auto nk = [&] { return kMod ? seqv(2) : p.nk; };
  if (vl && n0 >= nk()) return;  // past this sequence's keys
  const int rows_k = min(Bc, nk() - n0);
  // The warp's tiles in the three grids (row = key, or query for dQ; col = query or head-dim column).
  const int s_row = (warp % T::kSK) * T::kSRows, s_col = (warp / T::kSK) * T::kSCols;
  const int v_row = (warp % T::kVK) * T::kVRows, v_col = (warp / T::kVK) * T::kVCols;
  const int q_row = (warp % T::kQM) * T::kQRows, q_col = (warp / T::kQM) * T::kQCols;

  // dK's and dV's rows (kMod: set once in shared memory, read where stored).
  __half* const gdK0 = kMod ? nullptr : static_cast<__half*>(p.dk) + b * p.dk_batch_stride + n0 * p.dk_row_stride + hk * p.dk_head_stride;
  __half* const gdV0 = kMod ? nullptr : static_cast<__half*>(p.dv) + b * p.dv_batch_stride + n0 * p.dv_row_stride + hk * p.dv_head_stride;
  auto gdK = [&] { return kMod ? static_cast<__half*>(p.dk) + offv(5) : gdK0; };
  auto gdV = [&] { return kMod ? static_cast<__half*>(p.dv) + offv(6) : gdV0; };

  const int tr = (nq() + Br - 1) / Br;
  const BlockRange qr = key_block_queries<Br, Bc, kCausal, kMod>(n0, nq(), nk(), tr, p.window_left, p.window_right);
  const int i0 = qr.begin, per_head = qr.end - qr.begin;
  const int steps = groups * per_head;
  if (steps == 0) {  // no query sees these keys
    store_zero_rows<Bc, D, NT>(gdK(), p.dk_row_stride, rows_k, tid);
    store_zero_rows<Bc, D, NT>(gdV(), p.dv_row_stride, rows_k, tid);
    return;
  }

  // Shared memory: K | V (own tile, or with V's fragments in registers staged
  // in the last stream buffer, which the first step fills only after its
  // barrier (two stages) or after the fragments are read (one)) |
  // (Q | dO)[Stages] | P^T | dS^T | (L | Di)[2].
  __half* sK = smem;
  __half* sStream = sK + T::kOwnElems;
  __half* sP = sStream + T::kStages * T::kStreamElems;
  __half* sdS = sP + Bc * Br;
  __half* sV = T::kVRegs ? sStream + (T::kStages - 1) * T::kStreamElems : sK + Bc * D;
  float* sStat = reinterpret_cast<float*>(sdS + Bc * Br);
  const uint32_t aK = smem_u32(sK), aV = smem_u32(sV), aStream = smem_u32(sStream), aP = smem_u32(sP), adS = smem_u32(sdS);

  const LdAddr<D, kRowsFirst> la(lane);
  const LdAddr<D, kChunksFirst> lk(lane);
  const LdAddr<Br, kRowsFirst> lp(lane);
  const SliceAddr<D, kRowsFirst, T::kVCols / 16> sv(lane, v_col);

  auto head_of = [&](int s) { return hk * groups + s / per_head; };
  // Causal kDet walks its query blocks last to first (see above).
  auto qblock = [&](int s) { return kDet && kCausal ? tr - 1 - s % per_head : i0 + s % per_head; };
  auto row0_of = [&](int s) { return qblock(s) * Br; };
  auto issue = [&](int s, int buf) {
    const int h = head_of(s), m0 = row0_of(s);
    const __half* gQ = static_cast<const __half*>(p.q) + (kMod ? offv(0) : b * p.q_batch_stride) + m0 * p.q_row_stride + h * p.q_head_stride;
    const __half* gdO = static_cast<const __half*>(p.dout) + (kMod ? offv(1) : b * p.do_batch_stride) + m0 * p.do_row_stride + h * p.do_head_stride;
    __half* dst = sStream + buf * T::kStreamElems;
    cp_tile<Br, D, NT>(dst, gQ, p.q_row_stride, nq() - m0, tid);
    cp_tile<Br, D, NT>(dst + Br * D, gdO, p.do_row_stride, nq() - m0, tid);
  };
  auto stats = [&](int s, float& l, float& di) {
    l = INFINITY;
    di = 0.f;
    if constexpr (kMod) {
      const int row = row0_of(s) + tid;
      if (tid < Br) row_stats_at(p, offv(2) + static_cast<int64_t>(head_of(s)) * p.nq + row, row < nq(), l, di);
    } else {
      if (tid < Br) row_stats(p, b, head_of(s), row0_of(s) + tid, l, di);
    }
  };
  // kDet: query block i's counter, the key blocks [first, end) that add to
  // it (kb waits for kb - first, then leaves kb - first + 1, or 0 as the last).
  auto counter = [&](int s) {
    if constexpr (kMod)
      return reinterpret_cast<int*>(p.dq_accum + offv(4)) + (offv(3) + static_cast<int64_t>(head_of(s)) * p.dq_accum_rows + row0_of(s)) / Br;
    else
      return dq_count_base<T>(p) + (b * p.hq + head_of(s)) * tr + qblock(s);
  };
  auto adders = [&](int s) {  // kMod: the window's (else [0, the last key block some row of i sees])
    const WindowBlocks wb = window_blocks<Br, Bc>(qblock(s) * Br, nq(), nk(), p.window_left, p.window_right);
    return BlockRange{wb.n_begin, wb.n_end};
  };
  auto release = [&](int s) {
    if constexpr (kMod) {
      const BlockRange a = adders(s);
      st_release(counter(s), kb + 1 >= a.end ? 0 : kb - a.begin + 1);
    } else {
      const int i = qblock(s);
      const bool last = (kb + 1) * Bc >= p.nk || query_begin<Br, kCausal>((kb + 1) * Bc, p.nq, p.nk) > i;
      st_release(counter(s), last ? 0 : kb + 1);
    }
  };
  // Where thread 0 releases step s-1's adds (see above): after step s's
  // P^T/dS^T barrier; on sm_80 after its dV product, since there the former
  // spills 4-8 B at D128 (nvcc 11.8; after dV none; neither timed on an A100);
  // on a one-stage tile (D256 base) after dV everywhere: after the barrier its
  // causal twin spilled 4 B on sm_90, at the top its kMod one 12-20 B on sm_80-89.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // kMod: its window_blocks after dV spilled 20 B on the two-stage D256 tile.
  constexpr bool kReleaseAfterDV = !kMod || T::kStages == 1;
  constexpr bool kReleaseAtTop = kMod && T::kStages == 2;
#else
  constexpr bool kReleaseAfterDV = T::kStages == 1;
  constexpr bool kReleaseAtTop = false;
#endif
  auto put_stats = [&](int buf, float l, float di) {
    if (tid < Br) {
      sStat[buf * 2 * Br + tid] = l;
      sStat[buf * 2 * Br + Br + tid] = di;
    }
  };

  float dk[T::kVMT][T::kVCols / 8][4], dv[T::kVMT][T::kVCols / 8][4];
#pragma unroll
  for (int i = 0; i < T::kVMT; ++i)
#pragma unroll
    for (int n = 0; n < T::kVCols / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[i][n][e] = dv[i][n][e] = 0.f;
  constexpr int KF = T::kKRegs ? T::kSMT : 1, KK = T::kKRegs ? D / 16 : 1;
  constexpr int VF = T::kVRegs ? T::kSMT : 1, VKK = T::kVRegs ? D / 16 : 1;
  uint32_t kf[KF][KK][4], vf[VF][VKK][4];

  const __half* gK = static_cast<const __half*>(p.k) + (vl ? seq_k0() * p.k_row_stride : b * p.k_batch_stride) + n0 * p.k_row_stride + hk * p.k_head_stride;
  const __half* gV = static_cast<const __half*>(p.v) + (vl ? seq_k0() * p.v_row_stride : b * p.v_batch_stride) + n0 * p.v_row_stride + hk * p.v_head_stride;
  cp_tile<Bc, D, NT>(sK, gK, p.k_row_stride, rows_k, tid);
  cp_tile<Bc, D, NT>(sV, gV, p.v_row_stride, rows_k, tid);
  auto load_kv_frags = [&] {
    if constexpr (T::kVRegs) {
      cp_async_wait<0>();
      __syncthreads();
      if constexpr (T::kKRegs) load_frags<D, T::kSMT>(kf, la, aK, s_row);
      load_frags<D, T::kSMT>(vf, la, aV, s_row);
    }
  };
  if constexpr (T::kStages == 1 && T::kVRegs) {  // V's staging area is the one stream buffer
    cp_async_commit();
    load_kv_frags();
    __syncthreads();  // every warp has read V before step 0's copies land there
  }
  issue(0, 0);
  {
    float l, di;
    stats(0, l, di);
    put_stats(0, l, di);
  }
  cp_async_commit();
  // Two stages: V's staging area is stream buffer 1 from here; the first
  // step's barrier orders these reads before any copy into it.
  if constexpr (T::kStages == 2 && T::kVRegs) load_kv_frags();

  for (int s = 0; s < steps; ++s) {
    const int sb = s & 1, buf = T::kStages == 2 ? sb : 0;  // (L | Di) and Q | dO buffers
    const bool more = s + 1 < steps;
    cp_async_wait<0>();
    __syncthreads();  // step s's tiles landed; every warp is done with step s-1 (buffer buf^1, P^T, dS^T)
    if constexpr (kDet && kReleaseAtTop)
      if (s > 0 && tid == 0) release(s - 1);
    float l_next = INFINITY, di_next = 0.f;
    if constexpr (T::kStages == 2) {
      if (more) {  // the next block's copies overlap this whole step
        issue(s + 1, buf ^ 1);
        stats(s + 1, l_next, di_next);
      }
      cp_async_commit();
    } else if (more) {
      stats(s + 1, l_next, di_next);
    }
    const int m0 = row0_of(s);
    const uint32_t qb = aStream + buf * T::kStreamElems * 2, db = qb + Br * D * 2;
    {
      float st[T::kSMT][T::kSCols / 8][4], dp[T::kSMT][T::kSCols / 8][4];
      gemm_abt<A, D, T::kSMT, T::kSCols, T::kKRegs, E>(st, kf, la, aK, s_row, lk, qb, s_col);  // S^T = K Q^T
      gemm_abt<A, D, T::kSMT, T::kSCols, T::kVRegs, E>(dp, vf, la, aV, s_row, lk, db, s_col);  // dP^T = V dO^T
      if (kCausal && crosses_diagonal<Bc>(m0, n0, p.nq, p.nk))
        apply_mask_t<T::kSMT, T::kSCols / 8>(st, n0 + s_row, m0 + s_col, lane, p.nq, p.nk);
      if constexpr (kDQ && !kMod) {  // (kMod: window_shows hides them)
        // Keys past Nk: their zero-filled K gives dQ nothing, but exp2(0 - L) may be inf.
        if (n0 + Bc > p.nk) {
#pragma unroll
          for (int i = 0; i < T::kSMT; ++i)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh)
              if (n0 + s_row + 16 * i + g + 8 * hh >= p.nk)
#pragma unroll
                for (int j = 0; j < T::kSCols / 8; ++j) st[i][j][2 * hh] = st[i][j][2 * hh + 1] = -INFINITY;
        }
      }
      const float* sL = sStat + sb * 2 * Br;
      const float* sDi = sL + Br;
      if constexpr (kMod) {
        const ScoreMods m = ScoreMods::of(p, head_of(s), nq(), nk());
        const bool cap = p.softcap > 0.f;
#pragma unroll
        for (int j = 0; j < T::kSCols / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int c = s_col + 8 * j + 2 * t + e, q = m0 + c;  // lane (g, t) holds queries s_col+8j+2t, +1
            const float l = sL[c], di = sDi[c];
#pragma unroll
            for (int i = 0; i < T::kSMT; ++i)
#pragma unroll
              for (int hr = 0; hr < 2; ++hr) {
                const int k = n0 + s_row + 16 * i + g + 8 * hr;
                mod_p_ds(m, cap, st[i][j][2 * hr + e], float(q + m.off - k), window_shows(m, q, k), l, di, st[i][j][2 * hr + e],
                         dp[i][j][2 * hr + e]);  // P^T, dS^T
              }
          }
      } else {
#pragma unroll
        for (int j = 0; j < T::kSCols / 8; ++j) {
          // Lane (g, t) holds query columns s_col+8j+2t, +1 of its key rows.
          const float2 l2 = *reinterpret_cast<const float2*>(sL + s_col + 8 * j + 2 * t);
          const float2 di2 = *reinterpret_cast<const float2*>(sDi + s_col + 8 * j + 2 * t);
#pragma unroll
          for (int i = 0; i < T::kSMT; ++i)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
              p_ds(st[i][j][2 * hr], p.scale_log2, l2.x, di2.x, st[i][j][2 * hr], dp[i][j][2 * hr]);  // P^T, dS^T
              p_ds(st[i][j][2 * hr + 1], p.scale_log2, l2.y, di2.y, st[i][j][2 * hr + 1], dp[i][j][2 * hr + 1]);
            }
        }
      }
      store_frags<Br, T::kSMT, T::kSCols / 8, E>(st, sP, s_row, s_col, lane);
      store_frags<Br, T::kSMT, T::kSCols / 8, E>(dp, sdS, s_row, s_col, lane);
    }
    __syncthreads();  // P^T and dS^T complete
    if constexpr (kDet && !kReleaseAfterDV && !kReleaseAtTop)
      if (s > 0 && tid == 0) release(s - 1);  // every warp's step s-1 adds were issued before this step's barriers
    // dQ_i = dS K and its atomic adds: between dV and dK (FA2's order), so the
    // adds drain under dK's mmas instead of queueing at the next barrier (H200,
    // D128, ncu: lg_throttle 0.51 warps per issue with the adds last, FA2 0.03);
    // kDet after dK, where its wait for the predecessor overlaps all three products (see above).
    auto add_dq = [&] {
      // dQ_i = dS K: A = dS, read .trans from dS^T (kChunksFirst lane order
      // yields a0..a3); B = K over the keys, the warp's column slice.
      float dq[T::kQMT][T::kQCols / 8][4];
#pragma unroll
      for (int i = 0; i < T::kQMT; ++i)
#pragma unroll
        for (int n = 0; n < T::kQCols / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) dq[i][n][e] = 0.f;
      const SliceAddr<Br, kChunksFirst, T::kQMT> sa(lane, q_row);
      const SliceAddr<D, kRowsFirst, T::kQCols / 16> sk(lane, q_col);
#pragma unroll
      for (int kk = 0; kk < Bc / 16; ++kk) {
        uint32_t a[T::kQMT][4];
#pragma unroll
        for (int i = 0; i < T::kQMT; ++i) ldmatrix_x4_trans(a[i], sa.at(adS, 16 * kk, i));
#pragma unroll
        for (int dd = 0; dd < T::kQCols / 16; ++dd) {
          uint32_t bv[4];
          ldmatrix_x4_trans(bv, sk.at(aK, 16 * kk, dd));
#pragma unroll
          for (int i = 0; i < T::kQMT; ++i) {
            mma_k16<A, E>(dq[i][2 * dd], a[i], bv[0], bv[1]);
            mma_k16<A, E>(dq[i][2 * dd + 1], a[i], bv[2], bv[3]);
          }
        }
      }
      // The accumulator holds each Br-row query block in fragment order
      // (dq_accum_index): each atomic instruction of a warp adds 32 consecutive
      // floats, 4 whole 32-byte sectors, where the C layout (row g, columns 2t)
      // would touch 8 half-used ones.
      const int64_t blk = kMod ? (offv(3) + static_cast<int64_t>(head_of(s)) * p.dq_accum_rows + m0) * D : dq_accum_index<T>(b, head_of(s), p.hq, p.nq, m0);
      float* acc = p.dq_accum + blk + warp * T::kQRows * T::kQCols + lane;
      if constexpr (kDet) {  // as late as possible: the wait overlaps the mmas above
        if (lane == 0)
          while (ld_acquire(counter(s)) != (kMod ? kb - adders(s).begin : kb)) {
          }
        __syncwarp();
      }
#pragma unroll
      for (int i = 0; i < T::kQMT; ++i)
#pragma unroll
        for (int n = 0; n < T::kQCols / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) atomicAdd(acc + ((i * (T::kQCols / 8) + n) * 4 + e) * 32, dq[i][n][e]);
    };
    gemm_slice<A, Br, D, T::kVMT, T::kVCols, E>(dv, lp, aP, v_row, sv, db);  // dV += P^T dO
    if constexpr (kDet && kReleaseAfterDV)
      if (s > 0 && tid == 0) release(s - 1);
    if constexpr (kDQ && !kDet && T::kStages == 2) add_dq();
    gemm_slice<A, Br, D, T::kVMT, T::kVCols, E>(dk, lp, adS, v_row, sv, qb);  // dK += dS^T Q
    if constexpr (T::kStages == 1) {  // Q | dO read: the next block's copies overlap dQ
      __syncthreads();
      if (more) issue(s + 1, 0);
      cp_async_commit();
      if constexpr (kDQ) add_dq();
    }
    if constexpr (kDQ && kDet && T::kStages == 2) add_dq();
    if (more) put_stats(sb ^ 1, l_next, di_next);  // (L | Di) buffer sb^1 is free since the barrier above
  }

  // Epilogue: fp16 dK (times the softmax scale) over K, dV over the stream area.
  __syncthreads();  // every warp is done reading K and the streams
  if constexpr (kDet)
    if (tid == 0) release(steps - 1);
  __half* sdV = sStream;
#pragma unroll
  for (int i = 0; i < T::kVMT; ++i)
#pragma unroll
    for (int n = 0; n < T::kVCols / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[i][n][e] *= p.scale;
  store_frags<D, T::kVMT, T::kVCols / 8, E>(dk, sK, v_row, v_col, lane);
  store_frags<D, T::kVMT, T::kVCols / 8, E>(dv, sdV, v_row, v_col, lane);
  __syncthreads();
  store_rows<Bc, D, NT>(sK, gdK(), p.dk_row_stride, rows_k, tid);
  store_rows<Bc, D, NT>(sdV, gdV(), p.dv_row_stride, rows_k, tid);
}

// dQ = E(dq_accum * scale) for tile T's accumulator order, kPreRows rows per
// CTA on the pre kernel's grid; a thread writes 8 columns (16 bytes) of a row.
// Eight consecutive lanes take rows 8k..8k+7 of one column chunk: in fragment
// order their accumulator pieces are adjacent (4*(row&7) floats apart), so each
// warp load covers whole 128-byte lines (the row-major thread order touched a
// line per lane, and cost a fifth of the D128 backward on the H200). A thread's
// kIt pieces are all loaded before any is stored, so its loads are in flight
// together (the accumulator is read-only here: the pre kernel zeroes it).
template <class T, class E = __half>
__device__ __forceinline__ void bwd_dq_convert_kernel(const BwdParams& p) {
  constexpr int D = T::kD, C = D / 8, QR = T::kQRows, QC = T::kQCols;
  constexpr int kIt = kPreRows * C / kPreThreads;
  static_assert(kPreRows % 8 == 0 && T::kBr % 8 == 0, "a CTA's rows are whole groups of 8 within query blocks");
  static_assert(kPreRows * C % kPreThreads == 0, "whole passes of the CTA's threads");
  const int b = blockIdx.y / p.hq, h = blockIdx.y % p.hq;
  const int m0 = blockIdx.x * kPreRows;
  // After the modified single pass on packed sequences (cumulative lengths
  // set): b is a sequence, its rows start at its first query row.
  const bool vl = p.cu_seqlens_q != nullptr;
  const Seq sq = vl ? seq_of(p, b) : Seq{};
  const int nq = vl ? sq.nq : p.nq;
  const float* base = p.dq_accum + dq_accum_row<T>(p, vl, sq, b, h, 0) * D;
  __half* gdQ = static_cast<__half*>(p.dq) + (vl ? sq.q0 * p.dq_row_stride : b * p.dq_batch_stride) + h * p.dq_head_stride;
  // Whole groups of 8 rows (the lane order's), so up to 7 padding rows (within
  // the padded block) are read; only rows < Nq are written.
  const int items = min(kPreRows, (nq - m0 + 7) / 8 * 8) * C;
  float4 lo[kIt], hi[kIt];
#pragma unroll
  for (int it = 0; it < kIt; ++it) {
    const int idx = threadIdx.x + it * kPreThreads;
    if (idx >= items) break;
    const int j = idx >> 3, row = m0 + ((j / C) << 3) + (idx & 7), col = (j % C) * 8;
    const int r = row % T::kBr, w = r / QR + T::kQM * (col / QC), rr = r % QR, cc = col % QC;
    // Lane 4g+t holds columns 2t, 2t+1 (values e = 2hh, 2hh+1) of rows g and g+8 (hh).
    const float* f = base + (row - r) * D + w * QR * QC + (((rr >> 4) * (QC / 8) + cc / 8) * 4 + 2 * ((rr >> 3) & 1)) * 32 +
                     4 * (rr & 7);
    lo[it] = *reinterpret_cast<const float4*>(f);
    hi[it] = *reinterpret_cast<const float4*>(f + 32);
  }
#pragma unroll
  for (int it = 0; it < kIt; ++it) {
    const int idx = threadIdx.x + it * kPreThreads;
    if (idx >= items) break;
    const int j = idx >> 3, row = m0 + ((j / C) << 3) + (idx & 7), col = (j % C) * 8;
    const uint4 o = make_uint4(pack2<E>(lo[it].x * p.scale, hi[it].x * p.scale), pack2<E>(lo[it].y * p.scale, hi[it].y * p.scale),
                               pack2<E>(lo[it].z * p.scale, hi[it].z * p.scale), pack2<E>(lo[it].w * p.scale, hi[it].w * p.scale));
    if (row < nq) *reinterpret_cast<uint4*>(gdQ + row * p.dq_row_stride + col) = o;
  }
}

}  // namespace fa2
