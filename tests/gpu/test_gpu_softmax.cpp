// GPU causal softmax against the CPU twin: f32 within 1e-5 and bf16 within 1e-2 (relative to
// the largest expected value), exact zeros above the diagonal, in-place runs, and bit-identical
// repeats. Every test skips without a CUDA device.
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/kernels/cpu/softmax.h"
#include "runtime/kernels/cuda/softmax.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class CausalSoftmaxTest : public gpu_test::GpuTest {};

__nv_bfloat16* bf16(DeviceBuffer<uint16_t>& buffer) {
  return reinterpret_cast<__nv_bfloat16*>(buffer.data());
}

// Same length and the same bits in every element (no printing of large vectors on failure).
bool identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every entry j > i of each (T, T) matrix is exactly +0.
void expect_zero_above_diagonal(const std::vector<float>& matrices, int64_t T) {
  int64_t wrong = 0;
  for (size_t index = 0; index < matrices.size(); ++index) {
    const int64_t j = static_cast<int64_t>(index) % T, i = static_cast<int64_t>(index) / T % T;
    if (j > i && !(matrices[index] == 0.f)) ++wrong;
  }
  EXPECT_EQ(wrong, 0) << "entries above the diagonal that are not exactly 0";
}

struct Shape {
  int64_t batch_heads, T;
};
// T = 1, a partial warp, several warps, and rows longer than one block of threads.
const Shape kShapes[] = {{2, 1}, {3, 37}, {2, 64}, {2, 300}};

TEST_F(CausalSoftmaxTest, ForwardF32MatchesCpu) {
  for (const Shape& s : kShapes) {
    const size_t n = static_cast<size_t>(s.batch_heads * s.T * s.T);
    const std::vector<float> scores = gpu_test::random_vector(n, 11, 4.f);
    std::vector<float> expected(n);
    runtime::cpu::causal_softmax_forward(expected.data(), scores.data(), s.batch_heads, s.T);

    DeviceBuffer<float> d_scores(scores);
    DeviceBuffer<float> d_probs(std::vector<float>(n, 7.f));  // garbage the kernel must overwrite
    runtime::cuda::causal_softmax_forward(d_probs.data(), d_scores.data(), s.batch_heads, s.T,
                                          nullptr);
    const std::vector<float> probs = d_probs.download();
    EXPECT_CLOSE(probs, expected, 1e-5) << "T=" << s.T;
    expect_zero_above_diagonal(probs, s.T);

    // In place, and a second run gives the same bits.
    runtime::cuda::causal_softmax_forward(d_scores.data(), d_scores.data(), s.batch_heads, s.T,
                                          nullptr);
    EXPECT_TRUE(identical(d_scores.download(), probs)) << "in-place run differs, T=" << s.T;
  }
}

TEST_F(CausalSoftmaxTest, BackwardF32MatchesCpu) {
  for (const Shape& s : kShapes) {
    const size_t n = static_cast<size_t>(s.batch_heads * s.T * s.T);
    std::vector<float> probs(n);
    const std::vector<float> scores = gpu_test::random_vector(n, 12, 3.f);
    runtime::cpu::causal_softmax_forward(probs.data(), scores.data(), s.batch_heads, s.T);
    const std::vector<float> dprobs = gpu_test::random_vector(n, 13);  // garbage above too
    std::vector<float> expected(n);
    runtime::cpu::causal_softmax_backward(expected.data(), dprobs.data(), probs.data(),
                                          s.batch_heads, s.T);

    DeviceBuffer<float> d_probs(probs), d_dprobs(dprobs);
    DeviceBuffer<float> d_dscores(std::vector<float>(n, -3.f));
    runtime::cuda::causal_softmax_backward(d_dscores.data(), d_dprobs.data(), d_probs.data(),
                                           s.batch_heads, s.T, nullptr);
    const std::vector<float> dscores = d_dscores.download();
    EXPECT_CLOSE(dscores, expected, 1e-5) << "T=" << s.T;
    expect_zero_above_diagonal(dscores, s.T);

    runtime::cuda::causal_softmax_backward(d_dprobs.data(), d_dprobs.data(), d_probs.data(),
                                           s.batch_heads, s.T, nullptr);
    EXPECT_TRUE(identical(d_dprobs.download(), dscores)) << "in-place run differs, T=" << s.T;
  }
}

TEST_F(CausalSoftmaxTest, Bf16MatchesCpuOnRoundedInputs) {
  for (const Shape& s : kShapes) {
    const size_t n = static_cast<size_t>(s.batch_heads * s.T * s.T);
    std::vector<float> scores = gpu_test::random_vector(n, 14, 4.f);
    gpu_test::round_to_bf16_inplace(scores);
    std::vector<float> expected_probs(n);
    runtime::cpu::causal_softmax_forward(expected_probs.data(), scores.data(), s.batch_heads, s.T);

    DeviceBuffer<uint16_t> d_scores = gpu_test::upload_bf16(scores);
    DeviceBuffer<uint16_t> d_probs = gpu_test::upload_bf16(std::vector<float>(n, 5.f));
    runtime::cuda::causal_softmax_forward(bf16(d_probs), bf16(d_scores), s.batch_heads, s.T,
                                          nullptr);
    const std::vector<float> probs = gpu_test::download_bf16(d_probs);
    EXPECT_CLOSE(probs, expected_probs, 1e-2) << "T=" << s.T;
    expect_zero_above_diagonal(probs, s.T);

    // Backward from the device's bf16 probabilities, against the CPU on the same values.
    std::vector<float> dprobs = gpu_test::random_vector(n, 15);
    gpu_test::round_to_bf16_inplace(dprobs);
    std::vector<float> expected(n);
    runtime::cpu::causal_softmax_backward(expected.data(), dprobs.data(), probs.data(),
                                          s.batch_heads, s.T);
    DeviceBuffer<uint16_t> d_dprobs = gpu_test::upload_bf16(dprobs);
    DeviceBuffer<uint16_t> d_dscores = gpu_test::upload_bf16(std::vector<float>(n, 5.f));
    runtime::cuda::causal_softmax_backward(bf16(d_dscores), bf16(d_dprobs), bf16(d_probs),
                                           s.batch_heads, s.T, nullptr);
    const std::vector<float> dscores = gpu_test::download_bf16(d_dscores);
    EXPECT_CLOSE(dscores, expected, 1e-2) << "T=" << s.T;
    expect_zero_above_diagonal(dscores, s.T);

    runtime::cuda::causal_softmax_backward(bf16(d_dprobs), bf16(d_dprobs), bf16(d_probs),
                                           s.batch_heads, s.T, nullptr);
    EXPECT_TRUE(identical(gpu_test::download_bf16(d_dprobs), dscores))
        << "in-place run differs, T=" << s.T;
  }
}

TEST_F(CausalSoftmaxTest, RepeatedRunsAreBitIdentical) {
  const int64_t batch_heads = 4, T = 513;
  const size_t n = static_cast<size_t>(batch_heads * T * T);
  DeviceBuffer<float> d_scores(gpu_test::random_vector(n, 16, 6.f));
  DeviceBuffer<float> d_dprobs(gpu_test::random_vector(n, 17));
  DeviceBuffer<float> d_probs(n), d_dscores(n);
  std::vector<float> first_probs, first_dscores;
  for (int run = 0; run < 2; ++run) {
    runtime::cuda::causal_softmax_forward(d_probs.data(), d_scores.data(), batch_heads, T, nullptr);
    runtime::cuda::causal_softmax_backward(d_dscores.data(), d_dprobs.data(), d_probs.data(),
                                           batch_heads, T, nullptr);
    if (run == 0) {
      first_probs = d_probs.download();
      first_dscores = d_dscores.download();
    } else {
      EXPECT_TRUE(identical(d_probs.download(), first_probs));
      EXPECT_TRUE(identical(d_dscores.download(), first_dscores));
    }
  }
}

}  // namespace
