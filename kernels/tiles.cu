// tiles.cu: host program run by build.sh; prints the tile tables of traits.cuh
// and ladder/ladder.cuh, one entry per shipped symbol: as markdown rows for
// resources.md (argument "fwd", "bwd", "decode", "sm90a" or "ladder": that table) or as Go
// (argument "go") for internal/kernels/table_gen.go.
#include <cstdio>
#include <cstring>
#include "bwd_kv.cuh"
#include "decode.cuh"
#include "ladder/ladder.cuh"

static const char* mode = "fwd";
static bool is(const char* m) { return std::strcmp(mode, m) == 0; }

// A Go row: the Key (Stage, Mods, Packed, Ordered, Arch, HeadDim, Causal,
// BF16, Large, Short, Rung; zero fields left out but Arch and HeadDim), then the
// launch fields. mods is Go's Mods expression, or null for none.
struct GoKey {
  const char* stage;
  const char* mods = nullptr;
  bool packed = false, ordered = false, short_q = false;
};
static void go_row(GoKey k, int a, int d, bool causal, const char* sym, int br, int bc, int warps, int smem,
                   int rung = 0, bool bf16 = false, bool large = false, int sm80_max_nk = 0,
                   bool persistent = false, int col_groups = 1, int max_nq = 0) {
  std::printf("\t{Key: Key{Stage: %s", k.stage);
  if (k.mods) std::printf(", Mods: %s", k.mods);
  if (k.packed) std::printf(", Packed: true");
  if (k.ordered) std::printf(", Ordered: true");
  std::printf(", Arch: %d, HeadDim: %d", a, d);
  if (causal) std::printf(", Causal: true");
  if (bf16) std::printf(", BF16: true");
  if (large) std::printf(", Large: true");
  if (k.short_q) std::printf(", Short: true");
  if (rung) std::printf(", Rung: %d", rung);
  std::printf("}, Symbol: \"%s\", Br: %d, Bc: %d, Warps: %d", sym, br, bc, warps);
  if (col_groups > 1) std::printf(", ColGroups: %d", col_groups);
  std::printf(", SmemBytes: %d", smem);
  if (sm80_max_nk) std::printf(", SM80CausalMaxNk: %d", sm80_max_nk);
  if (persistent) std::printf(", Persistent: true");
  if (max_nq) std::printf(", MaxNq: %d", max_nq);
  std::printf("},\n");
}

// Every sm_80 row also ships a bf16 kernel (fwd.cu's FA2_FWD_BF16), the same tile;
// every row four modified forwards (FA2_FWD_MOD: Mods ModOn plus ModCap,
// ModALiBi, both or neither, suffixes _mod, _mod_cap, _mod_alibi,
// _mod_cap_alibi, no causal twin; packed sequences at run time) and a
// varlen pair (FA2_FWD_VARLEN: Packed, the plain symbol plus _varlen), fp16
// and on sm_80 bf16.
static const char* const mod_go[] = {"ModOn", "ModOn | ModCap", "ModOn | ModALiBi", "ModOn | ModCap | ModALiBi"};
static const char* const mod_sfx[] = {"_mod", "_mod_cap", "_mod_alibi", "_mod_cap_alibi"};
static const int mod_bits[] = {fa2::kModOn, fa2::kModOn | fa2::kModCap, fa2::kModOn | fa2::kModALiBi,
                               fa2::kModOn | fa2::kModCap | fa2::kModALiBi};

template <int A, int D>
void fwd_row() {
  using T = typename FwdTraits<A, D>::type;
  constexpr int kPerType = 2 + 4 + 2;  // plain, causal, the modified ones, the varlen pair
  for (int k = 0; k < (A == 80 ? 2 : 1) * kPerType; ++k) {
    const int kk = k % kPerType, mod = kk >= 2 && kk < 6 ? kk - 2 : -1;
    const bool varlen = kk >= 6, causal = kk == 1 || kk == 7, bf16 = k >= kPerType;
    char sym[64];
    std::snprintf(sym, sizeof sym, "fa2_fwd_sm%d_d%d%s%s%s", A, D, bf16 ? "_bf16" : "", causal ? "_causal" : mod >= 0 ? mod_sfx[mod] : "",
                  varlen ? "_varlen" : "");
    if (is("go"))
      go_row({"Fwd", mod >= 0 ? mod_go[mod] : nullptr, varlen}, A, D, causal, sym, T::kBr, T::kBc, T::kWarps, T::kSmemBytes, 0, bf16);
    else if (is("fwd"))
      std::printf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %s | %d |\n", sym, A, D, int(causal), T::kBr, T::kBc,
                  T::kWarps, T::kStages, T::kSplits, T::kQRegs ? "yes" : "no", T::kSmemBytes);
  }
}

// Br is the query rows per CTA (dQ) or per step (dK/dV), Bc the key rows per
// step (dQ) or per CTA (dK/dV): the grid is ceil(Nq/Br) (pre, dQ) or ceil(Nk/Bc) (dK/dV).
template <class T>
void bwd_tile(const char* stage, const char* name, int a, int d, bool causal, int br, int bc, bool bf16, bool varlen, bool mod = false) {
  char sym[64];
  std::snprintf(sym, sizeof sym, "fa2_bwd_%s_sm%d_d%d%s%s%s", name, a, d, bf16 ? "_bf16" : "", causal ? "_causal" : mod ? "_mod" : "",
                varlen ? "_varlen" : "");
  if (is("go"))
    go_row({stage, mod ? "ModOn" : nullptr, varlen}, a, d, causal, sym, br, bc, T::kWarps, T::kSmemBytes, 0, bf16, false, 0, false, T::kColGroups);
  else if (is("bwd"))
    std::printf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %s | %d |\n", sym, a, d, causal, br, bc, T::kWarps, T::kStages,
                T::kChunk, T::kRegs ? "yes" : "no", T::kSmemBytes);
}

// pre (Di): pre's grid and block, no tile.
void pre_row(int A, int D, bool bf16, bool varlen = false) {
  char sym[64];
  std::snprintf(sym, sizeof sym, "fa2_bwd_pre_sm%d_d%d%s%s", A, D, bf16 ? "_bf16" : "", varlen ? "_varlen" : "");
  if (is("go"))
    go_row({"BwdPre", nullptr, varlen}, A, D, false, sym, fa2::kPreRows, 0, fa2::kPreThreads / 32, 0, 0, bf16);
  else if (is("bwd"))
    std::printf("| %s | %d | %d | 0 | %d | 0 | %d | 0 | 0 | no | 0 |\n", sym, A, D, fa2::kPreRows, fa2::kPreThreads / 32);
}

// Every sm_80 row also ships bf16 kernels (bwd.cu's FA2_BWD_BF16), the same
// tiles, and every row and dtype the varlen three (FA2_BWD_VARLEN: Packed,
// the plain symbols plus _varlen) and the modified pair (FA2_BWD_MOD: dK/dV
// and dQ with Mods ModOn, plus _mod).
template <int A, int D>
void bwd_row() {
  using KV = typename BwdKVTraits<A, D>::type;
  using Q = typename BwdQTraits<A, D>::type;
  for (int bf16 = 0; bf16 < (A == 80 ? 2 : 1); ++bf16)
    for (int varlen = 0; varlen < 2; ++varlen) {
      pre_row(A, D, bf16, varlen);
      for (int causal = 0; causal < 2; ++causal)
        bwd_tile<KV>("BwdDKDV", "dkdv", A, D, causal, KV::kCols, KV::kRows, bf16, varlen);
      for (int causal = 0; causal < 2; ++causal)
        bwd_tile<Q>("BwdDQ", "dq", A, D, causal, Q::kRows, Q::kCols, bf16, varlen);
    }
  for (int bf16 = 0; bf16 < (A == 80 ? 2 : 1); ++bf16) {  // the modified pair (FA2_BWD_MOD), no causal twin
    bwd_tile<KV>("BwdDKDV", "dkdv", A, D, false, KV::kCols, KV::kRows, bf16, false, true);
    bwd_tile<Q>("BwdDQ", "dq", A, D, false, Q::kRows, Q::kCols, bf16, false, true);
  }
}

static const char* kv_regs(KVRegs r) { return r == kRegsKV ? "K, V" : r == kRegsV ? "V" : "no"; }

// The single pass (bwd_kv.cuh): the fused kernel (Br query rows per step, Bc
// key rows per CTA; Q | dO stages, a step is one chunk, regs = which of K and V
// stay in registers as fragments), its ordered twin (dkdvqdet, the same tile) and the dQ convert kernel (pre's grid and block); a large row's
// symbols end in _large (both marked Large in the Go table); fp16, then the
// bf16 twins (sm_80 only; _bf16 after the size suffix), the same tile.
template <int A, int D, bool L, bool DetNC, bool DetC>
void kvq_row() {
  using T = typename BwdKVQTraits<A, D, L>::type;
  const char* sfx = L ? "_large" : "";
  char sym[64];
  for (int bf16 = 0; bf16 < (A == 80 ? 2 : 1); ++bf16) {
    const char* e = bf16 ? "_bf16" : "";
    for (int det = 0; det < 2; ++det)  // det: the ordered twin (fa2_bwd_dkdvqdet_*, Options.Deterministic; FA2_KVQ_DET_NC/C)
      for (int causal = 0; causal < 2; ++causal) {
        if (det && !(causal ? DetC : DetNC)) continue;
        std::snprintf(sym, sizeof sym, "fa2_bwd_dkdvq%s_sm%d_d%d%s%s%s", det ? "det" : "", A, D, sfx, e, causal ? "_causal" : "");
        if (is("go"))
          go_row({"BwdDKDVQ", nullptr, false, bool(det)}, A, D, causal, sym, T::kBr, T::kBc, T::kWarps, T::kSmemBytes, 0, bf16, L);
        else if (is("bwd"))
          std::printf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %s | %d |\n", sym, A, D, causal, T::kBr, T::kBc, T::kWarps, T::kStages,
                      T::kBr, kv_regs(T::kRegs), T::kSmemBytes);
      }
    std::snprintf(sym, sizeof sym, "fa2_bwd_dqconv_sm%d_d%d%s%s", A, D, sfx, e);
    if (is("go"))
      go_row({"BwdDQConv"}, A, D, false, sym, fa2::kPreRows, 0, fa2::kPreThreads / 32, 0, 0, bf16, L);
    else if (is("bwd"))
      std::printf("| %s | %d | %d | 0 | %d | 0 | %d | 0 | 0 | no | 0 |\n", sym, A, D, fa2::kPreRows, fa2::kPreThreads / 32);
  }
}

// A head dim whose only backward is the single pass (FA2_BWD_KVQ_ALONE): its
// pre kernels (plain and varlen), and on each row's non-causal tile (large,
// then base) the modified single pass and, where the row has ordered twins,
// its ordered one (Mods ModOn, ordered or not; no causal twin), fp16
// then bf16 as kvq_row.
template <int A, int D, bool L, bool Det>
void kvq_mod_rows(int bf16) {
  using T = typename BwdKVQTraits<A, D, L>::nc;
  char sym[64];
  for (int det = 0; det < (Det ? 2 : 1); ++det) {
    std::snprintf(sym, sizeof sym, "fa2_bwd_dkdvq%s_sm%d_d%d%s%s_mod", det ? "det" : "", A, D, L ? "_large" : "", bf16 ? "_bf16" : "");
    if (is("go"))
      go_row({"BwdDKDVQ", "ModOn", false, bool(det)}, A, D, false, sym, T::kBr, T::kBc, T::kWarps, T::kSmemBytes, 0, bf16, L);
    else if (is("bwd"))
      std::printf("| %s | %d | %d | 0 | %d | %d | %d | %d | %d | %s | %d |\n", sym, A, D, T::kBr, T::kBc, T::kWarps, T::kStages, T::kBr,
                  kv_regs(T::kRegs), T::kSmemBytes);
  }
}
template <int A, int D, bool LargeDet, bool BaseDet>
void kvq_alone_rows() {
  for (int bf16 = 0; bf16 < (A == 80 ? 2 : 1); ++bf16) {
    pre_row(A, D, bf16);
    pre_row(A, D, bf16, true);
    kvq_mod_rows<A, D, true, LargeDet>(bf16);
    kvq_mod_rows<A, D, false, BaseDet>(bf16);
  }
}

// Decode (decode.cuh): Br is the packed query rows per CTA, Bc the keys per
// block. Ships fp16 on each path and bf16 on sm_80, as the forward.
template <int A, int D>
void decode_row() {
  using T = typename DecodeTraits<A, D>::type;
  for (int k = 0; k < (A == 80 ? 2 : 1); ++k) {
    const bool bf16 = k == 1;
    char sym[64];
    std::snprintf(sym, sizeof sym, "fa2_decode_sm%d_d%d%s", A, D, bf16 ? "_bf16" : "");
    if (is("go"))
      go_row({"Decode"}, A, D, false, sym, T::kRows, T::kBc, T::kWarps, T::kSmemBytes, 0, bf16);
    else if (is("decode"))
      std::printf("| %s | %d | %d | 0 | %d | %d | %d | %d | %d | %s | %d |\n", sym, A, D, T::kRows, T::kBc, T::kWarps,
                  T::kStages, T::kBw, bf16 ? "yes" : "no", T::kSmemBytes);
  }
}

// The Hopper forward (fa2_sm90a.cu, its own cubin): Arch 90, fp16 and its
// bf16 twins on the same tiles; the plain pair on Sm90Traits<D>::type, the
// modified forwards (no causal twin) on Sm90Traits<D>::mod; the plain pair's
// varlen twins (Packed, the plain symbol plus _varlen) on the plain tile.
template <class T>
void sm90a_one(const char* mods, const char* sym, bool causal, bool bf16, int sm80_max_nk, bool alibi_gemm = false,
               bool varlen = false) {
  const int smem = alibi_gemm ? T::kBiasSmemBytes : T::kSmemBytes;  // fwd_sm90.cuh's kSide adds its A and B
  if (is("go"))
    go_row({"Fwd", mods, varlen}, 90, T::kD, causal, sym, T::kBr, T::kBc, T::kWarps, smem, 0, bf16, false, sm80_max_nk,
           T::kPersistent);
  else if (is("sm90a"))
    std::printf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %s | %d |\n", sym, 90, T::kD, causal, T::kBr, T::kBc,
                T::kWarps, T::kStages, T::kSplits, T::kQRegs ? "yes" : "no", smem);
}
template <int D>
void sm90a_row() {
  using T = typename Sm90Traits<D>::type;
  using M = typename Sm90Traits<D>::mod;
  char sym[64];
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    const char* e = bf16 ? "_bf16" : "";
    for (int causal = 0; causal < 2; ++causal) {
      std::snprintf(sym, sizeof sym, "fa2_fwd_sm90a_d%d%s%s", D, e, causal ? "_causal" : "");
      sm90a_one<T>(nullptr, sym, causal, bf16, causal ? T::kSM80CausalMaxNk : 0);
      std::snprintf(sym, sizeof sym, "fa2_fwd_sm90a_d%d%s%s_varlen", D, e, causal ? "_causal" : "");
      sm90a_one<T>(nullptr, sym, causal, bf16, causal ? T::kSM80CausalMaxNk : 0, false, true);
    }
    for (int i = 0; i < 4; ++i) {
      std::snprintf(sym, sizeof sym, "fa2_fwd_sm90a_d%d%s%s", D, e, mod_sfx[i]);
      sm90a_one<M>(mod_go[i], sym, false, bf16, 0, fa2::sm90_alibi_gemm(mod_bits[i]));
    }
  }
}

// The Hopper forward's short-call tiles (FA2_SM90A_SHORT_TILES): the plain
// pair, fp16 and bf16, Short, for calls of at most kMaxNq query rows.
template <int D>
void sm90a_short_row() {
  using T = typename Sm90ShortTraits<D>::type;
  char sym[64];
  for (int bf16 = 0; bf16 < 2; ++bf16)
    for (int causal = 0; causal < 2; ++causal) {
      std::snprintf(sym, sizeof sym, "fa2_fwd_sm90a_d%d%s%s_short", D, bf16 ? "_bf16" : "", causal ? "_causal" : "");
      if (is("go"))
        go_row({"Fwd", nullptr, false, false, true}, 90, D, causal, sym, T::kBr, T::kBc, T::kWarps, T::kSmemBytes, 0,
               bf16, false, 0, T::kPersistent, 1, Sm90ShortTraits<D>::kMaxNq);
      else if (is("sm90a"))
        std::printf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %s | %d |\n", sym, 90, D, causal, T::kBr, T::kBc,
                    T::kWarps, T::kStages, T::kSplits, T::kQRegs ? "yes" : "no", T::kSmemBytes);
    }
}

// The Hopper backward (fa2_sm90a.cu, bwd_sm90.cuh): Arch 90, fp16 and bf16,
// dense; pre and dqconv (8 warps, Br rows per CTA, no dynamic shared memory),
// the single pass and (kOrdered) its ordered twin, causal or not.
template <int D>
void sm90a_bwd_row() {
  using T = typename Sm90BwdTraits<D>::type;
  char sym[64];
  bool bf16 = false;
  auto row = [&](const char* stage, bool ordered, bool causal, int bc, int warps, int smem) {
    if (is("go"))
      go_row({stage, nullptr, false, ordered}, 90, D, causal, sym, T::kBr, bc, warps, smem, 0, bf16);
    else if (is("sm90a"))
      std::printf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %s | %d |\n", sym, 90, D, causal, T::kBr, bc, warps,
                  bc ? T::kStages : 0, 1, "no", smem);
  };
  for (int t = 0; t < 2; ++t) {
    bf16 = t == 1;
    const char* e = bf16 ? "_bf16" : "";
    std::snprintf(sym, sizeof sym, "fa2_bwd_pre_sm90a_d%d%s", D, e);
    row("BwdPre", false, false, 0, 8, 0);
    for (int det = 0; det < (T::kOrdered ? 2 : 1); ++det)
      for (int causal = 0; causal < 2; ++causal) {
        std::snprintf(sym, sizeof sym, "fa2_bwd_dkdvq%s_sm90a_d%d%s%s", det ? "det" : "", D, e, causal ? "_causal" : "");
        row("BwdDKDVQ", det, causal, T::kBc, T::kWarps, T::kSmemBytes);
      }
    std::snprintf(sym, sizeof sym, "fa2_bwd_dqconv_sm90a_d%d%s", D, e);
    row("BwdDQConv", false, false, 0, 8, 0);
  }
}

// The kernel ladder (ladder/ladder.cuh): Arch 0, both paths run the same code;
// shared memory is static, so no dynamic bytes.
template <int R, class T, int D>
void ladder_row() {
  for (int causal = 0; causal < 2; ++causal) {
    char sym[64];
    std::snprintf(sym, sizeof sym, "fa2_ladder%d_d%d%s", R, D, causal ? "_causal" : "");
    if (is("go"))
      go_row({"Fwd"}, 0, D, causal, sym, T::kBr, T::kBc, T::kThreads / 32, 0, R);
    else if (is("ladder"))
      std::printf("| %s | %d | %d | %d | %d | %d | %d |\n", sym, R, D, causal, T::kBr, T::kBc, T::kThreads / 32);
  }
}

int main(int argc, char** argv) {
  if (argc > 1) mode = argv[1];
  if (is("go"))
    std::printf("// Code generated by kernels/build.sh from kernels/traits.cuh and kernels/ladder/ladder.cuh; DO NOT EDIT.\n\npackage kernels\n\n"
                "// variants is the tile table of kernels/traits.cuh, one entry per shipped symbol.\n"
                "var variants = []Variant{\n");
#define FWD_ROW(A, D, ...) fwd_row<A, D>();
#define BWD_ROW(A, D, ...) bwd_row<A, D>();
  FA2_FWD_TILES(FWD_ROW)
  FA2_BWD_TILES(BWD_ROW)
#define KVQ_ROW(A, D, SIZE, ...) kvq_row<A, D, FA2_KVQ_LARGE_##SIZE, FA2_KVQ_DET_NC_##SIZE, FA2_KVQ_DET_C_##SIZE>();
  FA2_BWD_KVQ_TILES(KVQ_ROW)
#define KVQ_ALONE_ROW(A, D, LARGE, BASE) kvq_alone_rows<A, D, FA2_KVQ_DET_NC_##LARGE, FA2_KVQ_DET_NC_##BASE>();
  FA2_BWD_KVQ_ALONE(KVQ_ALONE_ROW)
#define DECODE_ROW(A, D, ...) decode_row<A, D>();
  FA2_DECODE_TILES(DECODE_ROW)
  if (is("under8")) {
#define UNDER8_ROW(SYM, WHY) std::printf("| %s | %s |\n", SYM, WHY);
    FA2_SM75_UNDER8(UNDER8_ROW)
    return 0;
  }
  if (is("go")) std::printf("}\n\n// sm90aVariants are the Hopper kernels (fa2_sm90a.cubin), for sm_90 devices.\nvar sm90aVariants = []Variant{\n");
#define SM90A_ROW(D, ...) sm90a_row<D>();
  FA2_SM90A_TILES(SM90A_ROW)
#define SM90A_SHORT_ROW(D, ...) sm90a_short_row<D>();
  FA2_SM90A_SHORT_TILES(SM90A_SHORT_ROW)
#define SM90A_BWD_ROW(D, ...) sm90a_bwd_row<D>();
  FA2_SM90A_BWD_TILES(SM90A_BWD_ROW)
  if (is("go")) std::printf("}\n\n// ladderVariants are the kernel ladder's rungs 1-4 (kernels/ladder/), for every path.\nvar ladderVariants = []Variant{\n");
#define LADDER_ROW(R, D) ladder_row<R, fa2::ladder::Rung##R, D>();
  FA2_LADDER(LADDER_ROW)
  if (is("go"))
    std::printf("}\n\n// AccumPad is kernels/bwd.cuh's kAccumPad: on packed sequences the single\n"
                "// pass's dQ accumulator rounds each sequence's rows up to it.\nconst AccumPad = %d\n", fa2::kAccumPad);
  return 0;
}
