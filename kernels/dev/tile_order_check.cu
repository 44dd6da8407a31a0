// tile_order_check.cu: the Hopper forward's persistent tile order
// (fwd_sm90.cuh's TileOrder, the kernel's own code run on the host), checked
// without a GPU: for every shape and CTA count, the CTAs' rounds take each
// (query block, batch, head) tile exactly once; and how even the causal
// CTAs' work comes out (key blocks per CTA, max / mean), beside a plain
// round-robin stride (which aliases with Tr). Then the Hopper backward's
// plain causal CTA order (bwd_sm90.cuh's BwdCausalOrder): every (key block,
// batch, kv head) CTA taken once for every group count, and on the paper
// shapes a model of its balance: CTAs dispatched in order to the first free
// SM (one CTA per SM), each as long as its query blocks plus 2 (K, V and the
// dK, dV stores), the last SM's end over the mean, lightest first (one pair
// after the other) beside the groups of flashattn's hopperCausalGroups.
//   $(kernels/cuda12.sh) -std=c++17 -arch=sm_90a kernels/dev/tile_order_check.cu -o /tmp/toc && /tmp/toc
#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>
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

  int bcases = 0, bfailed = 0;
  for (int tc : {1, 2, 3, 7, 16, 33})
    for (int bhs : {1, 2, 5, 12, 13, 32, 128})
      for (int groups = 1; groups <= bhs; ++groups) {
        ++bcases;
        std::vector<int> seen(tc * bhs, 0);
        for (int lin = 0; lin < tc * bhs; ++lin) {
          int nb = -1, bh = -1;
          sm90::BwdCausalOrder{tc, bhs, groups}.at(lin, nb, bh);
          if (nb >= 0 && nb < tc && bh >= 0 && bh < bhs) ++seen[bh * tc + nb];
        }
        if (std::count(seen.begin(), seen.end(), 1) != tc * bhs) {
          std::printf("FAIL backward causal order: Tc %d, %d pairs, %d groups\n", tc, bhs, groups);
          ++bfailed;
        }
      }
  // The model: heaviest-first groups against lightest first, 132 SMs.
  auto model = [](int br, int n, int bhs, int groups) {
    const int tc = n / 128, tr = (n + br - 1) / br, sms = 132;
    std::priority_queue<double, std::vector<double>, std::greater<double>> free;
    for (int i = 0; i < sms; ++i) free.push(0);
    double sum = 0, end = 0;
    for (int lin = 0; lin < tc * bhs; ++lin) {
      int nb = tc - 1 - lin % tc, bh;
      if (groups > 0) sm90::BwdCausalOrder{tc, bhs, groups}.at(lin, nb, bh);
      const double w = tr - nb * 128 / br + 2, t = free.top() + w;
      free.pop(), free.push(t), sum += w, end = std::max(end, t);
    }
    return end / (sum / sms);
  };
  for (int d : {64, 128})
    for (int n : {1024, 2048, 4096, 8192, 16384}) {
      const int br = d == 64 ? Sm90BwdTraits<64>::type::kBr : Sm90BwdTraits<128>::type::kBr;
      const int bhs = 16384 / n * (2048 / d), tc = n / 128, per = std::max(1, (2 * 132 + tc - 1) / tc);
      const int groups = per >= bhs ? 1 : bhs / per;
      std::printf("backward D%-3d causal N %-5d %3d pairs: end/mean lightest first %.3f, %d groups heaviest first %.3f\n",
                  d, n, bhs, model(br, n, bhs, 0), groups, model(br, n, bhs, groups));
    }
  std::printf("backward causal order: %d/%d cases pass\n", bcases - bfailed, bcases);
  return failed || bfailed ? 1 : 0;
}
