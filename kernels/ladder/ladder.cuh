// ladder.cuh: the kernel ladder of tutorial chapter 6, from one thread per
// query row to the shipped kernel, one idea per rung:
//   1 rung1_scalar.cuh    scalar FA2 forward, fp32 math, one thread per query row
//   2 rung2_smem.cuh      + K/V blocks shared by the CTA in shared memory
//   3 rung3_mma.cuh       + tensor cores (mma.sync m16n8k8) for Q K^T and P V
//   4 rung4_ldmatrix.cuh  + ldmatrix on XOR-swizzled shared memory
//   5 ../fwd.cuh          + copies that overlap the math (cp.async double
//                           buffering on sm_80+, a register prefetch on sm_75)
//                           and the tuned tiles: the shipped kernel itself
// H200, D64, N 4096, non-causal, sm_80 path: 6.7, 16.6, 49.7, 215.0 and 320.6
// TFLOP/s for rungs 1-5 (docs/kernels.md has the forced sm_75 path too).
// FA2_LADDER(X): X(rung, D) per rung-kernel pair (plain and causal) that ladder.cu
// ships as fa2_ladder<rung>_d<D>[_causal] in fa2_ladder.fatbin and its Turing PTX;
// tiles.cu lists them for internal/kernels. They take the shipped kernels'
// FwdParams and launch contract, with static shared memory only.
#pragma once
#include "rung1_scalar.cuh"
#include "rung2_smem.cuh"
#include "rung3_mma.cuh"
#include "rung4_ldmatrix.cuh"

#define FA2_LADDER(X) X(1, 64) X(2, 64) X(3, 64) X(4, 64)
