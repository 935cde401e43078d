// CUDA twins of runtime/kernels/cpu/elementwise.h (and vocab_parallel.h's add_bias), plus
// f32 <-> bf16 conversion. Same argument order and `=` / `+=` rules as the CPU versions;
// every call is asynchronous on `stream` except the host-returning sum_squares.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/philox.h"

namespace runtime::cuda {

// out = a + b (=); out may alias a or b.
void add(float* out, const float* a, const float* b, int64_t n, cudaStream_t stream);
void add(__nv_bfloat16* out, const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t n,
         cudaStream_t stream);

// x *= s
void scale_inplace(float* x, float s, int64_t n, cudaStream_t stream);
void scale_inplace(__nv_bfloat16* x, float s, int64_t n, cudaStream_t stream);

// out(rows, cols) += bias(cols) for every row.
void add_bias(float* out, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);
void add_bias(__nv_bfloat16* out, const __nv_bfloat16* bias, int64_t rows, int64_t cols,
              cudaStream_t stream);

// Sum (or sum of squares) in double with a fixed partition of x (independent of the device),
// each part summed in a fixed tree order and the parts combined in a fixed order:
// deterministic. *result_device = sum (=); result_device is one double in device memory.
// partials: sum_partial_count(n) doubles of device scratch, or null (cudaMallocAsync).
int64_t sum_partial_count(int64_t n);
void sum(double* result_device, const float* x, int64_t n, cudaStream_t stream,
         double* partials = nullptr);
void sum(double* result_device, const __nv_bfloat16* x, int64_t n, cudaStream_t stream,
         double* partials = nullptr);
void sum_squares(double* result_device, const float* x, int64_t n, cudaStream_t stream,
                 double* partials = nullptr);
void sum_squares(double* result_device, const __nv_bfloat16* x, int64_t n, cudaStream_t stream,
                 double* partials = nullptr);
// out(init.rows, init.cols) = the shard's initial values (Note [Parameter init RNG]).
void init_param(float* out, const ParamInit& init, cudaStream_t stream);

// The same, returned to the host: synchronizes `stream`.
double sum_squares(const float* x, int64_t n, cudaStream_t stream);

// out = inp converted; f32 -> bf16 rounds to nearest even.
void convert(__nv_bfloat16* out, const float* inp, int64_t n, cudaStream_t stream);
void convert(float* out, const __nv_bfloat16* inp, int64_t n, cudaStream_t stream);

}  // namespace runtime::cuda
