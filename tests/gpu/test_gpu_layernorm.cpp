// runtime::cuda::layernorm_backward with the scratch it allocates for itself against the same
// call with the caller's scratch (what ops:: passes): bit-identical results, as are two runs.
// The op twins compare layernorm with the CPU; this path of the kernel they cannot reach.
// Skips without a device.
#include <cstdint>
#include <vector>

#include "runtime/kernels/cuda/layernorm.h"
#include "runtime/kernels/cuda/stream.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class GpuLayernorm : public gpu_test::GpuTest {};

constexpr float kEps = 1e-5f;

// Inputs of one test: x with a per-row offset (so the mean matters), weight, bias, dout, and the
// non-zero gradients the backward accumulates into.
struct Case {
  int64_t rows, C;
  std::vector<float> x, weight, bias, dout, dinp, dweight, dbias;
  Case(int64_t rows_, int64_t C_) : rows(rows_), C(C_) {
    x = gpu_test::random_vector(rows * C, 31, 2.f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < C; ++c) x[r * C + c] += 0.1f * static_cast<float>(r % 7);
    weight = gpu_test::random_vector(C, 32);
    bias = gpu_test::random_vector(C, 33);
    dout = gpu_test::random_vector(rows * C, 34);
    dinp = gpu_test::random_vector(rows * C, 35);
    dweight = gpu_test::random_vector(C, 36);
    dbias = gpu_test::random_vector(C, 37);
  }
};

struct Result {
  std::vector<float> out, mean, rstd, dinp, dweight, dbias;
};

// f32 on the device; `caller_scratch` passes a scratch buffer instead of letting the call allocate.
Result gpu_layernorm_f32(const Case& k, bool caller_scratch) {
  runtime::cuda::CudaStream stream;
  DeviceBuffer<float> x(k.x), weight(k.weight), bias(k.bias), dout(k.dout), dinp(k.dinp),
      dweight(k.dweight), dbias(k.dbias), out(k.x.size()), mean(k.rows), rstd(k.rows);
  DeviceBuffer<double> scratch(
      caller_scratch ? runtime::cuda::layernorm_backward_scratch_bytes(k.rows, k.C) / 8 : 0);
  runtime::cuda::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), weight.data(),
                                   bias.data(), k.rows, k.C, kEps, stream.get());
  runtime::cuda::layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(),
                                    x.data(), weight.data(), mean.data(), rstd.data(), k.rows, k.C,
                                    scratch.data(), stream.get());
  return Result{out.download(),  mean.download(),    rstd.download(),
                dinp.download(), dweight.download(), dbias.download()};
}

TEST_F(GpuLayernorm, OwnScratchAndCallerScratchGiveTheSameBits) {
  const Case k(1000, 384);
  const Result first = gpu_layernorm_f32(k, false);
  const Result second = gpu_layernorm_f32(k, true);
  EXPECT_EQ(first.out, second.out);
  EXPECT_EQ(first.dinp, second.dinp);
  EXPECT_EQ(first.dweight, second.dweight);
  EXPECT_EQ(first.dbias, second.dbias);
}

}  // namespace
