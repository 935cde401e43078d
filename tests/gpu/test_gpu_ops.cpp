// runtime::ops on CUDA tensors (register_cuda_backend) against runtime::ops on host tensors, each
// op on identical inputs: f32 within 1e-5 of max |host| or bit-identical where the kernel claims
// it; bf16 linear within 1e-2; bad dtypes name the op. Every test skips without a device.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/kernels/cpu/adamw.h"
#include "runtime/kernels/cpu/gelu.h"
#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/ops.h"
#include "runtime/philox.h"
#include "runtime/tensor.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

namespace ops = runtime::ops;
using runtime::DType;
using runtime::Tensor;

constexpr double kF32Tolerance = 1e-5;   // relative to max |host result|
constexpr double kBf16Tolerance = 1e-2;  // bf16 outputs (8 mantissa bits)

// The same values on the host (the reference) and on the device.
struct Twin {
  Tensor host;
  Tensor device;
};
// Each op runs once on each side, `x.*side` picking a Twin's tensor.
using Side = Tensor Twin::*;
constexpr Side kBothSides[] = {&Twin::host, &Twin::device};

class GpuOps : public gpu_test::GpuBackendTest {
 protected:
  template <class T>
  Tensor host_tensor(const std::vector<T>& values, DType dtype) {
    Tensor t = Tensor::empty(host_allocator_, {static_cast<int64_t>(values.size())}, dtype,
                             runtime::MemoryCategory::activation);
    if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(T));
    return t;
  }
  // A device tensor holding a copy of `host` (through ops::upload).
  Tensor device_copy(const Tensor& host) {
    Tensor t = Tensor::empty(device_allocator_, host.shape(), host.dtype(),
                             runtime::MemoryCategory::activation);
    ops::upload(t, host);
    return t;
  }
  Twin twin(const std::vector<float>& values) {
    Tensor host = host_tensor(values, DType::f32);
    return Twin{host, device_copy(host)};
  }
  Twin twin_i32(const std::vector<int32_t>& values) {
    Tensor host = host_tensor(values, DType::i32);
    return Twin{host, device_copy(host)};
  }
  Twin twin_u8(int64_t n) {
    Tensor host = host_tensor(std::vector<uint8_t>(static_cast<size_t>(n), 7), DType::u8);
    return Twin{host, device_copy(host)};
  }
  // Host f32 holds the values rounded to bf16 (the reference), the device the bf16 bits.
  Twin twin_bf16(std::vector<float> values) {
    gpu_test::round_to_bf16_inplace(values);
    return Twin{host_tensor(values, DType::f32),
                device_copy(host_tensor(gpu_test::to_bf16(values), DType::bf16))};
  }
  // Gives the device the host's values again, so the next op starts from identical inputs.
  void resync(const Twin& x) { ops::upload(x.device, x.host); }

  // The elements of a host or device tensor (through ops::download).
  template <class T>
  std::vector<T> elements(const Tensor& t) {
    Tensor host = t;
    if (t.device() != runtime::DeviceKind::cpu) {
      host =
          Tensor::empty(host_allocator_, t.shape(), t.dtype(), runtime::MemoryCategory::activation);
      ops::download(host, t);
    }
    const T* data = host.data<T>();
    return std::vector<T>(data, data + host.numel());
  }
  std::vector<float> floats(const Tensor& t) {
    if (t.dtype() == DType::bf16) return gpu_test::from_bf16(elements<uint16_t>(t));
    return elements<float>(t);
  }
  std::vector<float> device_floats(const Twin& x) { return floats(x.device); }
  std::vector<float> host_floats(const Twin& x) { return floats(x.host); }

  runtime::CpuAllocator host_allocator_;
  runtime::cuda::CudaAllocator device_allocator_;
};

#define EXPECT_TWIN_CLOSE(x, tolerance) \
  EXPECT_CLOSE(device_floats(x), host_floats(x), tolerance) << #x
#define EXPECT_TWIN_EQ(x) EXPECT_EQ(device_floats(x), host_floats(x)) << #x

std::vector<int32_t> random_ids(int64_t n, int32_t low, int32_t high, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int32_t> uniform(low, high - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = uniform(generator);
  return ids;
}

// Entries j <= i of each (T, T) matrix (the scores GEMM leaves the rest unspecified).
std::vector<float> lower_triangle(const std::vector<float>& matrices, int64_t T) {
  std::vector<float> lower;
  for (size_t index = 0; index < matrices.size(); ++index) {
    const int64_t i = static_cast<int64_t>(index) / T % T, j = static_cast<int64_t>(index) % T;
    if (j <= i) lower.push_back(matrices[index]);
  }
  return lower;
}

// The message of the std::logic_error (failed TRAINER_ASSERT) `call` throws, or "".
std::string assert_message(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::logic_error& error) {
    return error.what();
  }
  return "";
}

TEST_F(GpuOps, LinearMatchesHost) {
  const int64_t rows = 24, in_features = 40, out_features = 56;
  Twin inp = twin(gpu_test::random_vector(rows * in_features, 1, 2.0f));
  Twin weight = twin(gpu_test::random_vector(out_features * in_features, 2, 0.5f));
  Twin bias = twin(gpu_test::random_vector(out_features, 3));
  Twin out = twin(gpu_test::random_vector(rows * out_features, 4));
  Twin out_no_bias = twin(gpu_test::random_vector(rows * out_features, 5));
  for (Side side : kBothSides) {
    ops::linear_forward({.out = out.*side,
                         .input = inp.*side,
                         .weight = weight.*side,
                         .bias = bias.*side,
                         .rows = rows,
                         .in_features = in_features,
                         .out_features = out_features});
    ops::linear_forward({.out = out_no_bias.*side,
                         .input = inp.*side,
                         .weight = weight.*side,
                         .rows = rows,
                         .in_features = in_features,
                         .out_features = out_features});
  }
  EXPECT_TWIN_CLOSE(out, kF32Tolerance);
  EXPECT_TWIN_CLOSE(out_no_bias, kF32Tolerance);
  EXPECT_GT(gpu_test::relative_error(device_floats(out), device_floats(out_no_bias)), 1e-3);

  Twin dout = twin(gpu_test::random_vector(rows * out_features, 6));
  Twin dinp = twin(gpu_test::random_vector(rows * in_features, 7));             // =
  Twin dweight = twin(gpu_test::random_vector(out_features * in_features, 8));  // +=
  Twin dbias = twin(gpu_test::random_vector(out_features, 9));                  // +=
  for (Side side : kBothSides) {
    ops::linear_backward({.dinput = dinp.*side,
                          .dweight = dweight.*side,
                          .dbias = dbias.*side,
                          .dout = dout.*side,
                          .input = inp.*side,
                          .weight = weight.*side,
                          .rows = rows,
                          .in_features = in_features,
                          .out_features = out_features});
  }
  EXPECT_TWIN_CLOSE(dinp, kF32Tolerance);
  EXPECT_TWIN_CLOSE(dweight, kF32Tolerance);
  EXPECT_TWIN_CLOSE(dbias, kF32Tolerance);
}

TEST_F(GpuOps, Bf16LinearMatchesHostOnRoundedInputs) {
  const int64_t rows = 24, in_features = 40, out_features = 56;
  Twin inp = twin_bf16(gpu_test::random_vector(rows * in_features, 11, 2.0f));
  Twin weight = twin_bf16(gpu_test::random_vector(out_features * in_features, 12, 0.5f));
  Twin bias = twin_bf16(gpu_test::random_vector(out_features, 13));
  Twin out = twin_bf16(std::vector<float>(static_cast<size_t>(rows * out_features), 0.0f));
  for (Side side : kBothSides) {
    ops::linear_forward({.out = out.*side,
                         .input = inp.*side,
                         .weight = weight.*side,
                         .bias = bias.*side,
                         .rows = rows,
                         .in_features = in_features,
                         .out_features = out_features});
  }
  EXPECT_EQ(out.device.dtype(), DType::bf16);
  EXPECT_TWIN_CLOSE(out, kBf16Tolerance);

  // Parameter gradients stay f32 under bf16 activations (Note [CUDA op dtypes]).
  Twin dout = twin_bf16(gpu_test::random_vector(rows * out_features, 14));
  Twin dinp = twin_bf16(std::vector<float>(static_cast<size_t>(rows * in_features), 0.0f));
  Twin dweight = twin(gpu_test::random_vector(out_features * in_features, 15));
  Twin dbias = twin(gpu_test::random_vector(out_features, 16));
  for (Side side : kBothSides) {
    ops::linear_backward({.dinput = dinp.*side,
                          .dweight = dweight.*side,
                          .dbias = dbias.*side,
                          .dout = dout.*side,
                          .input = inp.*side,
                          .weight = weight.*side,
                          .rows = rows,
                          .in_features = in_features,
                          .out_features = out_features});
  }
  EXPECT_TWIN_CLOSE(dinp, kBf16Tolerance);
  EXPECT_TWIN_CLOSE(dweight, 1e-4);  // bf16 products are exact in the fp32 accumulator
  EXPECT_TWIN_CLOSE(dbias, 1e-4);
}

TEST_F(GpuOps, LayernormMatchesHost) {
  const int64_t rows = 10, channels = 48;
  Twin inp = twin(gpu_test::random_vector(rows * channels, 21, 3.0f));
  Twin weight = twin(gpu_test::random_vector(channels, 22));
  Twin bias = twin(gpu_test::random_vector(channels, 23));
  Twin out = twin(std::vector<float>(static_cast<size_t>(rows * channels), 0.0f));
  Twin mean = twin(std::vector<float>(static_cast<size_t>(rows), 0.0f));
  Twin rstd = twin(std::vector<float>(static_cast<size_t>(rows), 0.0f));
  for (Side side : kBothSides) {
    ops::layernorm_forward({.out = out.*side,
                            .mean = mean.*side,
                            .rstd = rstd.*side,
                            .input = inp.*side,
                            .weight = weight.*side,
                            .bias = bias.*side,
                            .rows = rows,
                            .channels = channels,
                            .eps = 1e-5f});
  }
  EXPECT_TWIN_CLOSE(out, kF32Tolerance);
  EXPECT_TWIN_CLOSE(mean, kF32Tolerance);
  EXPECT_TWIN_CLOSE(rstd, kF32Tolerance);

  resync(mean);
  resync(rstd);
  Twin dout = twin(gpu_test::random_vector(rows * channels, 24));
  Twin dinp = twin(gpu_test::random_vector(rows * channels, 25));  // += (the residual's gradient)
  Twin dweight = twin(gpu_test::random_vector(channels, 26));      // +=
  Twin dbias = twin(gpu_test::random_vector(channels, 27));        // +=
  for (Side side : kBothSides) {
    ops::layernorm_backward({.dinput = dinp.*side,
                             .dweight = dweight.*side,
                             .dbias = dbias.*side,
                             .dout = dout.*side,
                             .input = inp.*side,
                             .weight = weight.*side,
                             .mean = mean.*side,
                             .rstd = rstd.*side,
                             .rows = rows,
                             .channels = channels});
  }
  EXPECT_TWIN_CLOSE(dinp, kF32Tolerance);
  EXPECT_TWIN_CLOSE(dweight, kF32Tolerance);
  EXPECT_TWIN_CLOSE(dbias, kF32Tolerance);
}

// Core attention forward and backward in the model's order, each op compared on the host's
// inputs; the layout copies and the dropout mask bit for bit.
TEST_F(GpuOps, AttentionCoreMatchesHost) {
  const int64_t T = 9, B = 2, H = 3, D = 8, BH = B * H, n = BH * T * D;
  const float scale = 0.35f, p = 0.25f;
  const runtime::DropoutKey key =
      runtime::make_dropout_key(5, 1, 0, runtime::DropoutOp::attention_probs);
  auto zeros = [&](int64_t count) {
    return twin(std::vector<float>(static_cast<size_t>(count), 0.f));
  };
  Twin qkv = twin(gpu_test::random_vector(3 * n, 31));
  Twin q = zeros(n), k = zeros(n), v = zeros(n);
  Twin scores = zeros(BH * T * T), probs = zeros(BH * T * T), probs_drop = zeros(BH * T * T);
  Twin mask = twin_u8(BH * T * T);
  Twin ctx_heads = zeros(n), ctx = zeros(n);
  for (Side side : kBothSides)
    ops::split_qkv_heads({.q = q.*side,
                          .k = k.*side,
                          .v = v.*side,
                          .qkv = qkv.*side,
                          .seq = T,
                          .micro_batch = B,
                          .heads = H,
                          .head_dim = D});
  EXPECT_TWIN_EQ(q);
  EXPECT_TWIN_EQ(k);
  EXPECT_TWIN_EQ(v);
  for (Side side : kBothSides)
    ops::attention_scores_forward({.scores = scores.*side,
                                   .q = q.*side,
                                   .k = k.*side,
                                   .batch_heads = BH,
                                   .seq = T,
                                   .head_dim = D,
                                   .scale = scale});
  EXPECT_CLOSE(lower_triangle(device_floats(scores), T), lower_triangle(host_floats(scores), T),
               kF32Tolerance);
  resync(scores);
  for (Side side : kBothSides) {
    ops::causal_softmax_forward(
        {.probs = probs.*side, .scores = scores.*side, .batch_heads = BH, .seq = T});
  }
  EXPECT_TWIN_CLOSE(probs, kF32Tolerance);
  resync(probs);
  for (Side side : kBothSides)
    ops::dropout_attention_forward({.out = probs_drop.*side,
                                    .mask = mask.*side,
                                    .input = probs.*side,
                                    .micro_batch = B,
                                    .heads = H,
                                    .seq = T,
                                    .head_offset = 2,
                                    .sample_offset = 4,
                                    .drop_probability = p,
                                    .key = key});
  EXPECT_EQ(elements<uint8_t>(mask.device), elements<uint8_t>(mask.host));
  EXPECT_TWIN_EQ(probs_drop);
  for (Side side : kBothSides)
    ops::attention_context_forward({.ctx_heads = ctx_heads.*side,
                                    .probs = probs_drop.*side,
                                    .v = v.*side,
                                    .batch_heads = BH,
                                    .seq = T,
                                    .head_dim = D});
  EXPECT_TWIN_CLOSE(ctx_heads, kF32Tolerance);
  resync(ctx_heads);
  for (Side side : kBothSides) {
    ops::merge_heads({.ctx = ctx.*side,
                      .ctx_heads = ctx_heads.*side,
                      .seq = T,
                      .micro_batch = B,
                      .heads = H,
                      .head_dim = D});
  }
  EXPECT_TWIN_EQ(ctx);

  Twin dctx = twin(gpu_test::random_vector(n, 32));
  Twin dctx_heads = zeros(n), dprobs = zeros(BH * T * T), dv = zeros(n), dq = zeros(n),
       dk = zeros(n), dqkv = zeros(3 * n);
  for (Side side : kBothSides) {
    ops::split_heads({.ctx_heads = dctx_heads.*side,
                      .ctx = dctx.*side,
                      .seq = T,
                      .micro_batch = B,
                      .heads = H,
                      .head_dim = D});
  }
  EXPECT_TWIN_EQ(dctx_heads);
  for (Side side : kBothSides) {
    ops::attention_context_backward({.dprobs = dprobs.*side,
                                     .dv = dv.*side,
                                     .dctx_heads = dctx_heads.*side,
                                     .probs = probs_drop.*side,
                                     .v = v.*side,
                                     .batch_heads = BH,
                                     .seq = T,
                                     .head_dim = D});
  }
  EXPECT_TWIN_CLOSE(dprobs, kF32Tolerance);
  EXPECT_TWIN_CLOSE(dv, kF32Tolerance);
  resync(dprobs);
  for (Side side : kBothSides)  // in place, as the model runs it
    ops::dropout_backward({.dinput = dprobs.*side,
                           .dout = dprobs.*side,
                           .mask = mask.*side,
                           .count = BH * T * T,
                           .drop_probability = p});
  EXPECT_TWIN_EQ(dprobs);
  for (Side side : kBothSides)
    ops::causal_softmax_backward({.dscores = dprobs.*side,
                                  .dprobs = dprobs.*side,
                                  .probs = probs.*side,
                                  .batch_heads = BH,
                                  .seq = T});
  EXPECT_TWIN_CLOSE(dprobs, kF32Tolerance);
  resync(dprobs);
  for (Side side : kBothSides)
    ops::attention_scores_backward({.dq = dq.*side,
                                    .dk = dk.*side,
                                    .dscores = dprobs.*side,
                                    .q = q.*side,
                                    .k = k.*side,
                                    .batch_heads = BH,
                                    .seq = T,
                                    .head_dim = D,
                                    .scale = scale});
  EXPECT_TWIN_CLOSE(dq, kF32Tolerance);
  EXPECT_TWIN_CLOSE(dk, kF32Tolerance);
  resync(dq);
  resync(dk);
  resync(dv);
  for (Side side : kBothSides)
    ops::merge_qkv_heads({.dqkv = dqkv.*side,
                          .dq = dq.*side,
                          .dk = dk.*side,
                          .dv = dv.*side,
                          .seq = T,
                          .micro_batch = B,
                          .heads = H,
                          .head_dim = D});
  EXPECT_TWIN_EQ(dqkv);
}

TEST_F(GpuOps, HiddenDropoutMatchesHostBitForBit) {
  const int64_t T = 6, B = 3, C = 37, n = T * B * C;  // rows not aligned to Philox blocks
  const float p = 0.3f;
  const runtime::DropoutKey key = runtime::make_dropout_key(9, 2, 1, runtime::DropoutOp::mlp_out);
  Twin inp = twin(gpu_test::random_vector(n, 41));
  Twin out = twin(std::vector<float>(static_cast<size_t>(n), 0.0f));
  Twin mask = twin_u8(n);
  for (Side side : kBothSides)
    ops::dropout_hidden_forward({.out = out.*side,
                                 .mask = mask.*side,
                                 .input = inp.*side,
                                 .seq = T,
                                 .micro_batch = B,
                                 .channels = C,
                                 .seq_offset = 5,
                                 .sample_offset = 11,
                                 .drop_probability = p,
                                 .key = key});
  const std::vector<uint8_t> device_mask = elements<uint8_t>(mask.device);
  EXPECT_EQ(device_mask, elements<uint8_t>(mask.host));
  EXPECT_TWIN_EQ(out);
  int64_t dropped = 0;
  for (uint8_t kept : device_mask) dropped += kept == 0;
  EXPECT_GT(dropped, n / 5);  // about p * n: the comparison is not of two all-ones masks
  EXPECT_LT(dropped, 2 * n / 5);
}

TEST_F(GpuOps, EmbeddingsMatchHostBitForBit) {
  const int64_t T = 8, B = 3, C = 20, rows = T * B, vocab_start = 10, vocab_rows = 16;
  const int64_t positions = 32, t_offset = 4;
  Twin tokens = twin_i32(random_ids(rows, 0, 40, 51));  // some ids outside the shard
  Twin wte = twin(gpu_test::random_vector(vocab_rows * C, 52));
  Twin wpe = twin(gpu_test::random_vector(positions * C, 53));
  Twin out = twin(gpu_test::random_vector(rows * C, 54));
  for (Side side : kBothSides) {
    ops::embedding_forward({.out = out.*side,
                            .tokens = tokens.*side,
                            .wte = wte.*side,
                            .rows = rows,
                            .channels = C,
                            .vocab_start = vocab_start,
                            .vocab_rows = vocab_rows});
    ops::position_embedding_forward({.out = out.*side,
                                     .wpe = wpe.*side,
                                     .seq = T,
                                     .micro_batch = B,
                                     .channels = C,
                                     .seq_offset = t_offset});
  }
  EXPECT_TWIN_EQ(out);

  Twin dout = twin(gpu_test::random_vector(rows * C, 55));
  Twin dwte = twin(gpu_test::random_vector(vocab_rows * C, 56));  // +=
  Twin dwpe = twin(gpu_test::random_vector(positions * C, 57));   // +=
  for (Side side : kBothSides) {
    ops::embedding_backward({.dwte = dwte.*side,
                             .dout = dout.*side,
                             .tokens = tokens.*side,
                             .rows = rows,
                             .channels = C,
                             .vocab_start = vocab_start,
                             .vocab_rows = vocab_rows});
    ops::position_embedding_backward({.dwpe = dwpe.*side,
                                      .dout = dout.*side,
                                      .seq = T,
                                      .micro_batch = B,
                                      .channels = C,
                                      .seq_offset = t_offset});
  }
  EXPECT_TWIN_EQ(dwte);
  EXPECT_TWIN_EQ(dwpe);
}

TEST_F(GpuOps, ElementwiseOpsMatchHost) {
  const int64_t rows = 12, cols = 33, n = rows * cols;
  Twin a = twin(gpu_test::random_vector(n, 61, 3.0f));
  Twin b = twin(gpu_test::random_vector(n, 62));
  Twin bias = twin(gpu_test::random_vector(cols, 63));
  Twin sum = twin(std::vector<float>(static_cast<size_t>(n), 0.0f));
  for (Side side : kBothSides) {
    ops::add({.out = sum.*side, .a = a.*side, .b = b.*side, .count = n});
    ops::add_bias({.out = sum.*side, .bias = bias.*side, .rows = rows, .cols = cols});
    ops::scale_inplace({.x = sum.*side, .count = n, .scale = 0.75f});
  }
  EXPECT_TWIN_EQ(sum);

  for (runtime::cpu::GeluKind kind : {runtime::cpu::GeluKind::tanh, runtime::cpu::GeluKind::erf}) {
    Twin out = twin(std::vector<float>(static_cast<size_t>(n), 0.0f));
    Twin dinp = twin(gpu_test::random_vector(n, 64));  // dout on entry, in place
    for (Side side : kBothSides) {
      ops::gelu_forward({.out = out.*side, .input = a.*side, .count = n, .kind = kind});
      ops::gelu_backward(
          {.dinput = dinp.*side, .dout = dinp.*side, .input = a.*side, .count = n, .kind = kind});
    }
    EXPECT_TWIN_CLOSE(out, kF32Tolerance) << " kind " << static_cast<int>(kind);
    EXPECT_TWIN_CLOSE(dinp, kF32Tolerance) << " kind " << static_cast<int>(kind);
  }
}

TEST_F(GpuOps, CrossEntropyAndVocabShardMatchHost) {
  const int64_t rows = 7, vocab = 50, padded_vocab = 64;
  const float scale = 1.0f / rows;
  Twin logits = twin(gpu_test::random_vector(rows * padded_vocab, 71, 4.0f));
  Twin targets = twin_i32(random_ids(rows, 0, static_cast<int32_t>(vocab), 72));
  auto zeros = [&](int64_t count) {
    return twin(std::vector<float>(static_cast<size_t>(count), 0.f));
  };
  Twin losses = zeros(rows), lse = zeros(rows), dlogits = zeros(rows * padded_vocab);
  for (Side side : kBothSides)
    ops::cross_entropy_forward({.losses = losses.*side,
                                .lse = lse.*side,
                                .logits = logits.*side,
                                .targets = targets.*side,
                                .rows = rows,
                                .vocab = vocab,
                                .padded_vocab = padded_vocab});
  EXPECT_TWIN_CLOSE(losses, kF32Tolerance);
  EXPECT_TWIN_CLOSE(lse, kF32Tolerance);
  resync(lse);
  for (Side side : kBothSides)
    ops::cross_entropy_backward({.dlogits = dlogits.*side,
                                 .logits = logits.*side,
                                 .lse = lse.*side,
                                 .targets = targets.*side,
                                 .rows = rows,
                                 .vocab = vocab,
                                 .padded_vocab = padded_vocab,
                                 .scale = scale});
  EXPECT_TWIN_CLOSE(dlogits, kF32Tolerance);

  // The second of two shards of 32 columns: 18 real ones, then padding.
  const int64_t shard_cols = 32, vocab_start = 32, real_cols = vocab - vocab_start;
  Twin shard = twin(gpu_test::random_vector(rows * shard_cols, 73, 4.0f));
  Twin shard_targets = twin_i32(random_ids(rows, 20, static_cast<int32_t>(vocab), 74));
  Twin row_max = zeros(rows), row_sum = zeros(rows), target_logit = zeros(rows);
  Twin dshard = zeros(rows * shard_cols);
  for (Side side : kBothSides) {
    ops::vocab_shard_max({.row_max = row_max.*side,
                          .logits = shard.*side,
                          .rows = rows,
                          .real_cols = real_cols,
                          .shard_cols = shard_cols});
    ops::vocab_shard_target_logit({.target_logit = target_logit.*side,
                                   .logits = shard.*side,
                                   .targets = shard_targets.*side,
                                   .rows = rows,
                                   .vocab_start = vocab_start,
                                   .real_cols = real_cols,
                                   .shard_cols = shard_cols});
  }
  EXPECT_TWIN_EQ(row_max);
  EXPECT_TWIN_EQ(target_logit);
  for (Side side : kBothSides)
    ops::vocab_shard_sum_exp({.row_sum = row_sum.*side,
                              .logits = shard.*side,
                              .row_max = row_max.*side,
                              .rows = rows,
                              .real_cols = real_cols,
                              .shard_cols = shard_cols});
  EXPECT_TWIN_CLOSE(row_sum, kF32Tolerance);
  resync(row_sum);
  // finish turns (target logit, sum of exp) into (loss, lse) in place.
  for (Side side : kBothSides)
    ops::vocab_shard_finish({.losses = target_logit.*side,
                             .lse = row_sum.*side,
                             .row_max = row_max.*side,
                             .rows = rows});
  EXPECT_TWIN_CLOSE(target_logit, kF32Tolerance);
  EXPECT_TWIN_CLOSE(row_sum, kF32Tolerance);
  resync(row_sum);
  for (Side side : kBothSides)
    ops::vocab_shard_cross_entropy_backward({.dlogits = dshard.*side,
                                             .logits = shard.*side,
                                             .lse = row_sum.*side,
                                             .targets = shard_targets.*side,
                                             .rows = rows,
                                             .vocab_start = vocab_start,
                                             .real_cols = real_cols,
                                             .shard_cols = shard_cols,
                                             .scale = scale});
  EXPECT_TWIN_CLOSE(dshard, kF32Tolerance);
}

TEST_F(GpuOps, CopyZeroSumsAndAdamWMatchHost) {
  const int64_t n = 300000;  // several chunks of the device reductions
  Twin x = twin(gpu_test::random_vector(n, 81));
  Twin copied = twin(std::vector<float>(static_cast<size_t>(n), 0.0f));
  for (Side side : kBothSides) ops::copy(copied.*side, x.*side);
  EXPECT_TWIN_EQ(copied);
  EXPECT_EQ(device_floats(copied), host_floats(x));

  const double host_sum = ops::sum(x.host), device_sum = ops::sum(x.device);
  EXPECT_NEAR(device_sum, host_sum, 1e-10 * n);
  EXPECT_EQ(ops::sum(x.device), device_sum) << "sum is not deterministic";
  const double host_squares = ops::sum_squares({.x = x.host, .count = n});
  EXPECT_NEAR(ops::sum_squares({.x = x.device, .count = n}), host_squares, 1e-10 * host_squares);

  Twin x16 = twin_bf16(gpu_test::random_vector(n, 82));
  double rounded_sum = 0.0, rounded_squares = 0.0;
  for (float value : host_floats(x16)) {
    rounded_sum += value;
    rounded_squares += static_cast<double>(value) * value;
  }
  EXPECT_NEAR(ops::sum(x16.device), rounded_sum, 1e-10 * n);
  EXPECT_NEAR(ops::sum_squares({.x = x16.device, .count = n}), rounded_squares,
              1e-10 * rounded_squares);

  ops::zero(copied.device);
  EXPECT_EQ(device_floats(copied), std::vector<float>(static_cast<size_t>(n), 0.0f));
  EXPECT_EQ(ops::sum(copied.device), 0.0);

  const int64_t params = 1000;
  Twin param = twin(gpu_test::random_vector(params, 83));
  Twin exp_avg = twin(gpu_test::random_vector(params, 84, 0.1f));
  std::vector<float> second_moments = gpu_test::random_vector(params, 85, 0.01f);
  for (float& value : second_moments) value = std::fabs(value);  // v >= 0
  Twin exp_avg_sq = twin(second_moments);
  Twin grad = twin(gpu_test::random_vector(params, 86));
  runtime::cpu::AdamWParams hyper;
  hyper.lr = 1e-3f;
  hyper.weight_decay = 0.1f;
  hyper.step = 3;
  for (Side side : kBothSides) {
    ops::adamw_step({.param = param.*side,
                     .exp_avg = exp_avg.*side,
                     .exp_avg_sq = exp_avg_sq.*side,
                     .grad = grad.*side,
                     .count = params,
                     .hyper = hyper});
  }
  EXPECT_TWIN_CLOSE(param, kF32Tolerance);
  EXPECT_TWIN_CLOSE(exp_avg, kF32Tolerance);
  EXPECT_TWIN_CLOSE(exp_avg_sq, kF32Tolerance);
}

// bf16 mixed precision: convert both ways bit-exact against the host rule, and AdamW over fp32
// master weights writing the bf16 copy in the same pass equals AdamW then a convert.
TEST_F(GpuOps, ConvertAndAdamwBf16CopyMatchHostBitForBit) {
  const int64_t n = 4099;  // not a multiple of any block size
  Twin x = twin(gpu_test::random_vector(n, 101, 30.0f));
  Twin x16{host_tensor(std::vector<uint16_t>(static_cast<size_t>(n)), DType::bf16), Tensor()};
  x16.device = device_copy(x16.host);
  Twin back = twin(std::vector<float>(static_cast<size_t>(n)));
  for (Side side : kBothSides) {
    ops::convert(x16.*side, x.*side);
    ops::convert(back.*side, x16.*side);
  }
  EXPECT_EQ(elements<uint16_t>(x16.device), elements<uint16_t>(x16.host));
  EXPECT_TWIN_EQ(back);

  Twin param = twin(gpu_test::random_vector(n, 102));
  Twin exp_avg = twin(std::vector<float>(static_cast<size_t>(n)));
  Twin exp_avg_sq = twin(std::vector<float>(static_cast<size_t>(n)));
  Twin grad = twin(gpu_test::random_vector(n, 103));
  runtime::cpu::AdamWParams hyper;
  hyper.lr = 1e-2f;
  hyper.weight_decay = 0.1f;
  for (Side side : kBothSides) {
    ops::adamw_step({.param = param.*side,
                     .exp_avg = exp_avg.*side,
                     .exp_avg_sq = exp_avg_sq.*side,
                     .param_copy = x16.*side,
                     .grad = grad.*side,
                     .count = n,
                     .hyper = hyper});
  }
  // The copy is the rounding of the device's own updated master weights.
  Twin rounded{host_tensor(std::vector<uint16_t>(static_cast<size_t>(n)), DType::bf16), Tensor()};
  rounded.device = device_copy(rounded.host);
  ops::convert(rounded.device, param.device);
  EXPECT_EQ(elements<uint16_t>(x16.device), elements<uint16_t>(rounded.device));
  EXPECT_TWIN_CLOSE(param, kF32Tolerance);
  ops::synchronize(param.device);
}

TEST_F(GpuOps, WrongDtypesAndDevicesFailNamingTheOp) {
  const int64_t n = 16;
  Twin x = twin(gpu_test::random_vector(n, 91));
  Twin x16 = twin_bf16(gpu_test::random_vector(n, 92));
  std::string message = assert_message([&] {
    ops::gelu_forward({.out = x16.device, .input = x.device, .count = n, .kind = {}});
  });
  EXPECT_NE(message.find("ops::gelu_forward"), std::string::npos) << message;
  EXPECT_NE(message.find("out=bf16 input=f32"), std::string::npos) << message;

  // layernorm statistics are f32 even under bf16 activations
  Twin stats16 = twin_bf16(gpu_test::random_vector(2, 93));
  message = assert_message([&] {
    ops::layernorm_forward({.out = x16.device,
                            .mean = stats16.device,
                            .rstd = stats16.device,
                            .input = x16.device,
                            .weight = x16.device,
                            .bias = x16.device,
                            .rows = 2,
                            .channels = 8,
                            .eps = 1e-5f});
  });
  EXPECT_NE(message.find("mean is bf16, must be f32"), std::string::npos) << message;

  message = assert_message(
      [&] { ops::add({.out = x.device, .a = x.host, .b = x.device, .count = n}); });
  EXPECT_NE(message.find("a is a host tensor"), std::string::npos) << message;
  message = assert_message(
      [&] { ops::add({.out = x.device, .a = x.device, .b = x.device, .count = 2 * n}); });
  EXPECT_NE(message.find("has 16 elements, the call needs 32"), std::string::npos) << message;
  message = assert_message([&] { ops::copy(x16.device, x.device.view(0, {n / 2})); });
  EXPECT_NE(message.find("ops::copy"), std::string::npos) << message;
}

TEST_F(GpuOps, DestroyingTheContextUnregistersTheBackend) {
  Twin x = twin(gpu_test::random_vector(8, 95));
  context_.reset();
  EXPECT_THROW(ops::zero(x.device), runtime::LibraryError);
}

}  // namespace
