// runtime::cuda layernorm against runtime::cpu: f32 forward (out, mean, rstd) and backward
// (dinp, dweight, dbias accumulated into non-zero buffers) within 1e-5 of max |ref|; bf16 within
// 1e-2 on host-rounded inputs; backward bit-identical across runs and with caller scratch.
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/kernels/cpu/layernorm.h"
#include "runtime/kernels/cuda/layernorm.h"
#include "runtime/kernels/cuda/stream.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class GpuLayernorm : public gpu_test::GpuTest {};

__nv_bfloat16* bf16(DeviceBuffer<uint16_t>& buffer) {
  return reinterpret_cast<__nv_bfloat16*>(buffer.data());
}

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
  void round_to_bf16() {
    for (auto* v : {&x, &weight, &bias, &dout, &dinp}) gpu_test::round_to_bf16_inplace(*v);
  }
};

struct Result {
  std::vector<float> out, mean, rstd, dinp, dweight, dbias;
};

Result cpu_layernorm(const Case& k) {
  Result r{std::vector<float>(k.x.size()),
           std::vector<float>(k.rows),
           std::vector<float>(k.rows),
           k.dinp,
           k.dweight,
           k.dbias};
  runtime::cpu::layernorm_forward(r.out.data(), r.mean.data(), r.rstd.data(), k.x.data(),
                                  k.weight.data(), k.bias.data(), k.rows, k.C, kEps);
  runtime::cpu::layernorm_backward(r.dinp.data(), r.dweight.data(), r.dbias.data(), k.dout.data(),
                                   k.x.data(), k.weight.data(), r.mean.data(), r.rstd.data(),
                                   k.rows, k.C);
  return r;
}

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

Result gpu_layernorm_bf16(const Case& k) {
  runtime::cuda::CudaStream stream;
  auto x = gpu_test::upload_bf16(k.x);
  auto weight = gpu_test::upload_bf16(k.weight);
  auto bias = gpu_test::upload_bf16(k.bias);
  auto dout = gpu_test::upload_bf16(k.dout);
  auto dinp = gpu_test::upload_bf16(k.dinp);
  DeviceBuffer<uint16_t> out(k.x.size());
  DeviceBuffer<float> dweight(k.dweight), dbias(k.dbias), mean(k.rows), rstd(k.rows);
  runtime::cuda::layernorm_forward(bf16(out), mean.data(), rstd.data(), bf16(x), bf16(weight),
                                   bf16(bias), k.rows, k.C, kEps, stream.get());
  runtime::cuda::layernorm_backward(bf16(dinp), dweight.data(), dbias.data(), bf16(dout), bf16(x),
                                    bf16(weight), mean.data(), rstd.data(), k.rows, k.C, nullptr,
                                    stream.get());
  return Result{gpu_test::download_bf16(out),  mean.download(),    rstd.download(),
                gpu_test::download_bf16(dinp), dweight.download(), dbias.download()};
}

void expect_close(const Result& actual, const Result& expected, double tolerance) {
  EXPECT_CLOSE(actual.out, expected.out, tolerance);
  EXPECT_CLOSE(actual.mean, expected.mean, tolerance);
  EXPECT_CLOSE(actual.rstd, expected.rstd, tolerance);
  EXPECT_CLOSE(actual.dinp, expected.dinp, tolerance);
  EXPECT_CLOSE(actual.dweight, expected.dweight, tolerance);
  EXPECT_CLOSE(actual.dbias, expected.dbias, tolerance);
}

TEST_F(GpuLayernorm, F32MatchesCpu) {
  // 600 rows: several row chunks in the parameter-gradient reduction; 300 channels: a partial
  // block.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{600, 300}, {5, 1024}, {1, 7}};
  for (const auto& [rows, C] : shapes) {
    const Case k(rows, C);
    SCOPED_TRACE(testing::Message() << rows << " x " << C);
    expect_close(gpu_layernorm_f32(k, false), cpu_layernorm(k), 1e-5);
  }
}

TEST_F(GpuLayernorm, BackwardIsDeterministic) {
  const Case k(1000, 384);
  const Result first = gpu_layernorm_f32(k, false);
  const Result second = gpu_layernorm_f32(k, true);
  EXPECT_EQ(first.out, second.out);
  EXPECT_EQ(first.dinp, second.dinp);
  EXPECT_EQ(first.dweight, second.dweight);
  EXPECT_EQ(first.dbias, second.dbias);
}

TEST_F(GpuLayernorm, Bf16MatchesCpuOnRoundedInputs) {
  Case k(256, 512);
  k.round_to_bf16();
  expect_close(gpu_layernorm_bf16(k), cpu_layernorm(k), 1e-2);
}

}  // namespace
