// tanh_probe.cu: tanh.approx.f32 (the softcap's tanh, mask.cuh) against tanh
// in double over y in [-12, 12]: max, mean signed and rms relative error per
// |y| range (a biased error would show in the LSE, a zero-mean one averages out).
// Build: nvcc -O3 -arch=sm_90 kernels/dev/tanh_probe.cu -o tanh_probe
// (bench/results/2026-11-30-h200-masks2/run.sh runs it).
#include <cmath>
#include <cstdio>
#include <vector>
__global__ void k(const float* y, float* t, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float r; asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(y[i])); t[i] = r; }
}
int main() {
  const int n = 1 << 24;
  std::vector<float> y(n), t(n);
  for (int i = 0; i < n; ++i) y[i] = -12.f + 24.f * (i + 0.5f) / n;
  float *dy, *dt;
  cudaMalloc(&dy, n * 4); cudaMalloc(&dt, n * 4);
  cudaMemcpy(dy, y.data(), n * 4, cudaMemcpyHostToDevice);
  k<<<(n + 255) / 256, 256>>>(dy, dt, n);
  cudaMemcpy(t.data(), dt, n * 4, cudaMemcpyDeviceToHost);
  const double edges[] = {0, 0.05, 0.25, 0.5, 1, 2, 4, 12};
  std::printf("|y| range        max rel err   mean signed rel err   rms rel err   (fp16 unit roundoff 2^-11 = %.3g)\n", std::ldexp(1.0, -11));
  for (int b = 0; b < 7; ++b) {
    double mx = 0, sum = 0, sq = 0; long cnt = 0;
    for (int i = 0; i < n; ++i) {
      double a = std::fabs((double)y[i]);
      if (a < edges[b] || a >= edges[b + 1]) continue;
      double tr = std::tanh((double)y[i]), r = ((double)t[i] - tr) / tr;
      mx = std::fmax(mx, std::fabs(r)); sum += r; sq += r * r; ++cnt;
    }
    std::printf("[%5.2f, %5.2f)  %.3e     %+.3e            %.3e\n", edges[b], edges[b + 1], mx, sum / cnt, std::sqrt(sq / cnt));
  }
  return 0;
}
