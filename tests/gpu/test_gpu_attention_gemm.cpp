// GPU attention products (cuBLAS strided-batched GEMMs) against the CPU twins: f32 within
// 1e-5 and bf16 within 1e-2 relative, dprobs exactly 0 above the diagonal, bit-identical
// repeated runs. Scores are compared on and below the diagonal only. Skips without a device.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/kernels/cpu/attention.h"
#include "runtime/kernels/cpu/softmax.h"
#include "runtime/kernels/cuda/attention_gemm.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;

class AttentionGemmTest : public gpu_test::GpuTest {};

__nv_bfloat16* bf16(DeviceBuffer<uint16_t>& buffer) {
  return reinterpret_cast<__nv_bfloat16*>(buffer.data());
}

bool identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Entries on and below the diagonal of each (T, T) matrix (the causal part).
std::vector<float> lower_triangle(const std::vector<float>& matrices, int64_t T) {
  std::vector<float> out;
  for (size_t index = 0; index < matrices.size(); ++index) {
    const int64_t j = static_cast<int64_t>(index) % T, i = static_cast<int64_t>(index) / T % T;
    if (j <= i) out.push_back(matrices[index]);
  }
  return out;
}

int64_t nonzero_above_diagonal(const std::vector<float>& matrices, int64_t T) {
  int64_t count = 0;
  for (size_t index = 0; index < matrices.size(); ++index) {
    const int64_t j = static_cast<int64_t>(index) % T, i = static_cast<int64_t>(index) / T % T;
    if (j > i && !(matrices[index] == 0.f)) ++count;
  }
  return count;
}

// Zeroes the entries above the diagonal (what the causal softmax leaves there).
void make_causal(std::vector<float>& matrices, int64_t T) {
  for (size_t index = 0; index < matrices.size(); ++index) {
    const int64_t j = static_cast<int64_t>(index) % T, i = static_cast<int64_t>(index) / T % T;
    if (j > i) matrices[index] = 0.f;
  }
}

// Inputs and CPU results of all four products for one shape; `bf16_inputs` rounds every
// input to bf16 first, so CPU and GPU see the same values.
struct Case {
  int64_t BH, T, D;
  float scale;
  std::vector<float> q, k, v, dscores, probs, dctx;
  std::vector<float> scores, dq, dk, ctx, dprobs, dv;  // CPU results

  Case(int64_t bh, int64_t t, int64_t d, bool bf16_inputs)
      : BH(bh), T(t), D(d), scale(1.f / std::sqrt(static_cast<float>(d))) {
    const size_t heads = static_cast<size_t>(BH * T * D), squares = static_cast<size_t>(BH * T * T);
    q = gpu_test::random_vector(heads, 31);
    k = gpu_test::random_vector(heads, 32);
    v = gpu_test::random_vector(heads, 33);
    dctx = gpu_test::random_vector(heads, 34);
    dscores = gpu_test::random_vector(squares, 35);
    make_causal(dscores, T);
    const std::vector<float> logits = gpu_test::random_vector(squares, 36, 3.f);
    probs.resize(squares);
    runtime::cpu::causal_softmax_forward(probs.data(), logits.data(), BH, T);
    if (bf16_inputs) {
      for (std::vector<float>* input : {&q, &k, &v, &dctx, &dscores, &probs})
        gpu_test::round_to_bf16_inplace(*input);
    }
    scores.resize(squares);
    dprobs.resize(squares);
    dq.resize(heads);
    dk.resize(heads);
    ctx.resize(heads);
    dv.resize(heads);
    runtime::cpu::attention_scores_forward(scores.data(), q.data(), k.data(), BH, T, D, scale);
    runtime::cpu::attention_scores_backward(dq.data(), dk.data(), dscores.data(), q.data(),
                                            k.data(), BH, T, D, scale);
    runtime::cpu::attention_context_forward(ctx.data(), probs.data(), v.data(), BH, T, D);
    runtime::cpu::attention_context_backward(dprobs.data(), dv.data(), dctx.data(), probs.data(),
                                             v.data(), BH, T, D);
  }
};

struct Shape {
  int64_t BH, T, D;
};
// Odd sizes (no dimension a multiple of the GEMM tiles) and a GPT-2-like head.
const Shape kShapes[] = {{6, 33, 17}, {4, 128, 64}, {2, 1, 8}};

TEST_F(AttentionGemmTest, F32ProductsMatchCpu) {
  runtime::cuda::CublasHandle cublas;
  for (const Shape& s : kShapes) {
    const Case c(s.BH, s.T, s.D, /*bf16_inputs=*/false);
    const size_t heads = c.q.size(), squares = c.probs.size();
    DeviceBuffer<float> q(c.q), k(c.k), v(c.v), dscores(c.dscores), probs(c.probs), dctx(c.dctx);
    DeviceBuffer<float> scores(squares), dq(heads), dk(heads), ctx(heads), dv(heads);
    DeviceBuffer<float> dprobs(std::vector<float>(squares, 8.f));  // garbage above the diagonal

    runtime::cuda::attention_scores_forward(scores.data(), q.data(), k.data(), s.BH, s.T, s.D,
                                            c.scale, cublas, nullptr);
    runtime::cuda::attention_scores_backward(dq.data(), dk.data(), dscores.data(), q.data(),
                                             k.data(), s.BH, s.T, s.D, c.scale, cublas, nullptr);
    runtime::cuda::attention_context_forward(ctx.data(), probs.data(), v.data(), s.BH, s.T, s.D,
                                             cublas, nullptr);
    runtime::cuda::attention_context_backward(dprobs.data(), dv.data(), dctx.data(), probs.data(),
                                              v.data(), s.BH, s.T, s.D, cublas, nullptr);

    EXPECT_CLOSE(lower_triangle(scores.download(), s.T), lower_triangle(c.scores, s.T), 1e-5)
        << "scores, T=" << s.T;
    EXPECT_CLOSE(dq.download(), c.dq, 1e-5) << "dq, T=" << s.T;
    EXPECT_CLOSE(dk.download(), c.dk, 1e-5) << "dk, T=" << s.T;
    EXPECT_CLOSE(ctx.download(), c.ctx, 1e-5) << "ctx, T=" << s.T;
    const std::vector<float> dprobs_out = dprobs.download();
    EXPECT_CLOSE(dprobs_out, c.dprobs, 1e-5) << "dprobs, T=" << s.T;
    EXPECT_EQ(nonzero_above_diagonal(dprobs_out, s.T), 0) << "dprobs above the diagonal";
    EXPECT_CLOSE(dv.download(), c.dv, 1e-5) << "dv, T=" << s.T;
  }
}

TEST_F(AttentionGemmTest, Bf16ProductsMatchCpuOnRoundedInputs) {
  runtime::cuda::CublasHandle cublas;
  for (const Shape& s : kShapes) {
    const Case c(s.BH, s.T, s.D, /*bf16_inputs=*/true);
    const size_t heads = c.q.size(), squares = c.probs.size();
    DeviceBuffer<uint16_t> q = gpu_test::upload_bf16(c.q), k = gpu_test::upload_bf16(c.k);
    DeviceBuffer<uint16_t> v = gpu_test::upload_bf16(c.v), dctx = gpu_test::upload_bf16(c.dctx);
    DeviceBuffer<uint16_t> dscores = gpu_test::upload_bf16(c.dscores);
    DeviceBuffer<uint16_t> probs = gpu_test::upload_bf16(c.probs);
    DeviceBuffer<uint16_t> scores(squares), dq(heads), dk(heads), ctx(heads), dv(heads);
    DeviceBuffer<uint16_t> dprobs = gpu_test::upload_bf16(std::vector<float>(squares, 8.f));

    runtime::cuda::attention_scores_forward(bf16(scores), bf16(q), bf16(k), s.BH, s.T, s.D, c.scale,
                                            cublas, nullptr);
    runtime::cuda::attention_scores_backward(bf16(dq), bf16(dk), bf16(dscores), bf16(q), bf16(k),
                                             s.BH, s.T, s.D, c.scale, cublas, nullptr);
    runtime::cuda::attention_context_forward(bf16(ctx), bf16(probs), bf16(v), s.BH, s.T, s.D,
                                             cublas, nullptr);
    runtime::cuda::attention_context_backward(bf16(dprobs), bf16(dv), bf16(dctx), bf16(probs),
                                              bf16(v), s.BH, s.T, s.D, cublas, nullptr);

    EXPECT_CLOSE(lower_triangle(gpu_test::download_bf16(scores), s.T),
                 lower_triangle(c.scores, s.T), 1e-2)
        << "scores, T=" << s.T;
    EXPECT_CLOSE(gpu_test::download_bf16(dq), c.dq, 1e-2) << "dq, T=" << s.T;
    EXPECT_CLOSE(gpu_test::download_bf16(dk), c.dk, 1e-2) << "dk, T=" << s.T;
    EXPECT_CLOSE(gpu_test::download_bf16(ctx), c.ctx, 1e-2) << "ctx, T=" << s.T;
    const std::vector<float> dprobs_out = gpu_test::download_bf16(dprobs);
    EXPECT_CLOSE(dprobs_out, c.dprobs, 1e-2) << "dprobs, T=" << s.T;
    EXPECT_EQ(nonzero_above_diagonal(dprobs_out, s.T), 0) << "dprobs above the diagonal";
    EXPECT_CLOSE(gpu_test::download_bf16(dv), c.dv, 1e-2) << "dv, T=" << s.T;
  }
}

TEST_F(AttentionGemmTest, RepeatedRunsAreBitIdentical) {
  runtime::cuda::CublasHandle cublas;
  const Case c(16, 256, 64, /*bf16_inputs=*/false);
  const size_t heads = c.q.size(), squares = c.probs.size();
  DeviceBuffer<float> q(c.q), k(c.k), v(c.v), dscores(c.dscores), probs(c.probs), dctx(c.dctx);
  DeviceBuffer<float> scores(squares), dq(heads), dk(heads), ctx(heads), dprobs(squares), dv(heads);
  std::vector<std::vector<float>> first;
  for (int run = 0; run < 2; ++run) {
    runtime::cuda::attention_scores_forward(scores.data(), q.data(), k.data(), c.BH, c.T, c.D,
                                            c.scale, cublas, nullptr);
    runtime::cuda::attention_scores_backward(dq.data(), dk.data(), dscores.data(), q.data(),
                                             k.data(), c.BH, c.T, c.D, c.scale, cublas, nullptr);
    runtime::cuda::attention_context_forward(ctx.data(), probs.data(), v.data(), c.BH, c.T, c.D,
                                             cublas, nullptr);
    runtime::cuda::attention_context_backward(dprobs.data(), dv.data(), dctx.data(), probs.data(),
                                              v.data(), c.BH, c.T, c.D, cublas, nullptr);
    const std::vector<std::vector<float>> results = {scores.download(), dq.download(),
                                                     dk.download(),     ctx.download(),
                                                     dprobs.download(), dv.download()};
    if (run == 0) {
      first = results;
      EXPECT_CLOSE(results[1], c.dq, 1e-5);  // the products are right, not only repeatable
    } else {
      for (size_t i = 0; i < results.size(); ++i)
        EXPECT_TRUE(identical(results[i], first[i])) << "product " << i << " changed";
    }
  }
}

}  // namespace
