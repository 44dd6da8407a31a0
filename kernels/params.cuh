// params.cuh: the one kernel argument, shared with Go (internal/kernels.FwdParams).
// Layout is part of the launch contract: the Go struct is passed by value as raw
// bytes, so every offset below is asserted.
#pragma once
#include <cstddef>
#include <cstdint>

struct FwdParams {
  // Device pointers: q, k, v, o fp16 (BSHD, last dim contiguous); lse fp32 (B, Hq, Nq).
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;

  // Element strides (int64 so B*N*H*D may exceed 2^31).
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;

  int32_t b, nq, nk, hq, hkv, d;
  float scale_log2;  // softmax scale * log2(e): scores go through exp2
  float scale;       // softmax scale, for the natural-log LSE
};

static_assert(sizeof(void*) == 8, "64-bit device pointers");
// One assert per field; the message is the Go field name (internal/kernels checks them).
static_assert(offsetof(FwdParams, q) == 0, "Q");
static_assert(offsetof(FwdParams, k) == 8, "K");
static_assert(offsetof(FwdParams, v) == 16, "V");
static_assert(offsetof(FwdParams, o) == 24, "O");
static_assert(offsetof(FwdParams, lse) == 32, "LSE");
static_assert(offsetof(FwdParams, q_batch_stride) == 40, "QBatchStride");
static_assert(offsetof(FwdParams, q_row_stride) == 48, "QRowStride");
static_assert(offsetof(FwdParams, q_head_stride) == 56, "QHeadStride");
static_assert(offsetof(FwdParams, k_batch_stride) == 64, "KBatchStride");
static_assert(offsetof(FwdParams, k_row_stride) == 72, "KRowStride");
static_assert(offsetof(FwdParams, k_head_stride) == 80, "KHeadStride");
static_assert(offsetof(FwdParams, v_batch_stride) == 88, "VBatchStride");
static_assert(offsetof(FwdParams, v_row_stride) == 96, "VRowStride");
static_assert(offsetof(FwdParams, v_head_stride) == 104, "VHeadStride");
static_assert(offsetof(FwdParams, o_batch_stride) == 112, "OBatchStride");
static_assert(offsetof(FwdParams, o_row_stride) == 120, "ORowStride");
static_assert(offsetof(FwdParams, o_head_stride) == 128, "OHeadStride");
static_assert(offsetof(FwdParams, b) == 136, "B");
static_assert(offsetof(FwdParams, nq) == 140, "Nq");
static_assert(offsetof(FwdParams, nk) == 144, "Nk");
static_assert(offsetof(FwdParams, hq) == 148, "Hq");
static_assert(offsetof(FwdParams, hkv) == 152, "Hkv");
static_assert(offsetof(FwdParams, d) == 156, "D");
static_assert(offsetof(FwdParams, scale_log2) == 160, "ScaleLog2");
static_assert(offsetof(FwdParams, scale) == 164, "Scale");
static_assert(sizeof(FwdParams) == 168, "FwdParams size (Go: unsafe.Sizeof(FwdParams{}))");
