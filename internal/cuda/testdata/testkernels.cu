// Kernels for the binding's own tests (not GoFlash kernels). Regenerate the
// PTX with `go generate ./internal/cuda` (needs nvcc; the output is committed).

// c = a + b, one thread per element.
extern "C" __global__ void vec_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// A struct passed by value, with mixed field widths, like FwdParams.
struct EchoParams {
    unsigned long long out;  // float* device pointer
    long long x;
    int n;
    float s;
};

// Writes the struct's fields back, so the test checks the Go layout.
extern "C" __global__ void echo_params(EchoParams p) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float* o = reinterpret_cast<float*>(p.out);
        o[0] = (float)p.x;
        o[1] = (float)p.n;
        o[2] = p.s;
    }
}

// Touches every word of its dynamic shared memory, so a launch with more
// than 48 KiB needs the function attribute raised first.
extern "C" __global__ void smem_sum(float* out, int words) {
    extern __shared__ float sm[];
    for (int i = threadIdx.x; i < words; i += blockDim.x) sm[i] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0;
        for (int i = 0; i < words; i++) s += sm[i];
        out[0] = s;
    }
}

// Does nothing: launch overhead measurements.
extern "C" __global__ void empty(EchoParams p) {}
