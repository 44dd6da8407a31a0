// tile_order_check.cu: the Hopper forward's persistent tile order
// (fwd_sm90.cuh's TileOrder, the kernel's own code run on the host), checked
// without a GPU: for every shape and CTA count, the CTAs' rounds take each
// (query block, batch, head) tile exactly once; and how even the causal
// CTAs' work comes out (key blocks per CTA, max / mean), beside a plain
// round-robin stride (which aliases with Tr).
//   $(kernels/cuda12.sh) -std=c++17 -arch=sm_90a kernels/dev/tile_order_check.cu -o /tmp/toc && /tmp/toc
#include <algorithm>
#include <cstdio>
#include <vector>

#include "../fa2_sm90a.cu"

template <class T, bool C>
static bool check(int b, int hq, int nq, int nk, int ctas, double* spread, double* rr_spread) {
  FwdParams p{};
  p.b = b, p.hq = hq, p.hkv = hq, p.nq = nq, p.nk = nk, p.d = T::kD;
  const int stride = std::min(ctas, ((nq + T::kBr - 1) / T::kBr) * b * hq);
  // The plain kernels' order (the modified ones' at() calls mask.cuh's device-only window_blocks).
  const sm90::TileOrder<T, C, 0> order(p, stride);
  std::vector<int> seen(order.tiles, 0);
  std::vector<long> work(stride, 0), rr(stride, 0);
  for (int first = 0; first < stride; ++first)
    for (int r = 0; r < order.rounds; ++r) {
      const int pos = order.position(first, r);
      if (pos < 0) continue;
      const auto x = order.at(pos);
      const int mb = x.m0 / T::kBr, bh = x.b * hq + x.h;
      if (x.m0 % T::kBr || mb < 0 || mb >= order.tr || x.b < 0 || x.b >= b || x.h < 0 || x.h >= hq) {
        std::printf("FAIL D%d causal %d B%d H%d Nq%d Nk%d ctas %d: position %d -> tile (%d, %d, %d)\n", T::kD, C, b, hq,
                    nq, nk, ctas, pos, x.m0, x.b, x.h);
        return false;
      }
      ++seen[bh * order.tr + mb];
      work[first] += x.n_end;
    }
  // The plain round-robin: a stride over the tiles, (b, h) slowest, each
  // (b, h)'s heaviest query block first.
  const int tc = (nk + T::kBc - 1) / T::kBc;
  for (int first = 0; first < stride; ++first)
    for (int pos = first; pos < order.tiles; pos += stride) {
      const int mb = order.tr - 1 - pos % order.tr, last = mb * T::kBr + T::kBr - 1 + nk - nq;
      rr[first] += C ? (last < 0 ? 0 : std::min(tc, last / T::kBc + 1)) : tc;
    }
  for (int i = 0; i < order.tiles; ++i)
    if (seen[i] != 1) {
      std::printf("FAIL D%d causal %d B%d H%d Nq%d Nk%d ctas %d: tile %d taken %d times\n", T::kD, C, b, hq, nq, nk,
                  ctas, i, seen[i]);
      return false;
    }
  auto sp = [](const std::vector<long>& w) {
    double sum = 0;
    for (long x : w) sum += x;
    return sum > 0 ? *std::max_element(w.begin(), w.end()) / (sum / w.size()) : 1.0;
  };
  *spread = sp(work), *rr_spread = sp(rr);
  return true;
}

int main() {
  int cases = 0, failed = 0;
  auto run = [&](auto tile, auto causal, int b, int hq, int nq, int nk, int ctas, bool show) {
    using T = typename decltype(tile)::type;
    double s, rs;
    ++cases;
    if (!check<T, decltype(causal)::value>(b, hq, nq, nk, ctas, &s, &rs)) ++failed;
    else if (show)
      std::printf("D%-3d causal %d B%-2d H%-2d N %-5d %3d CTAs: work max/mean %.3f (round-robin %.3f)\n", T::kD,
                  decltype(causal)::value, b, hq, nq, ctas, s, rs);
  };
  using D64 = Sm90Traits<64>;
  using D128 = Sm90Traits<128>;
  using Yes = std::true_type;
  using No = std::false_type;
  // Coverage: odd sizes, Nq != Nk both ways, CTA counts below, at and above the tiles.
  for (int b : {1, 2, 3})
    for (int hq : {1, 4, 7})
      for (int nq : {1, 63, 200, 700, 1100})
        for (int nk : {1, 129, 700, 1100})
          for (int ctas : {1, 3, 5, 132, 1000}) {
            run(D64{}, Yes{}, b, hq, nq, nk, ctas, false), run(D64{}, No{}, b, hq, nq, nk, ctas, false);
            run(D128{}, Yes{}, b, hq, nq, nk, ctas, false), run(D128{}, No{}, b, hq, nq, nk, ctas, false);
          }
  // Balance on the FA2 paper's shapes (B = 16k / N, H = 2048 / D), 132 SMs.
  for (int n : {2048, 4096, 8192, 16384}) {
    run(D64{}, Yes{}, 16384 / n, 32, n, n, 132, true);
    run(D128{}, Yes{}, 16384 / n, 16, n, n, 132, true);
  }
  std::printf("tile order: %d/%d cases pass\n", cases - failed, cases);
  return failed ? 1 : 0;
}
