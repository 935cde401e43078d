// CUDA twin of runtime/kernels/cpu/adamw.h: AdamW (torch semantics, amsgrad off) over fp32
// master params, fp32 moments and fp32 grads, in place; optionally also writes the updated
// params rounded to bf16 (the weights the model computes with). Asynchronous on `stream`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/kernels/cpu/adamw.h"

namespace runtime::cuda {

using AdamWParams = runtime::cpu::AdamWParams;

// Updates param, exp_avg (m), exp_avg_sq (v) in place from grad; the step's scalars (bias
// corrections, decay) are computed on the host in double exactly as runtime::cpu::adamw_step.
void adamw_step(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                const AdamWParams& hyper, cudaStream_t stream);

// The same, and param_bf16 = bf16(updated param) (=), rounded to nearest even.
void adamw_step(float* param, float* exp_avg, float* exp_avg_sq, __nv_bfloat16* param_bf16,
                const float* grad, int64_t n, const AdamWParams& hyper, cudaStream_t stream);

}  // namespace runtime::cuda
