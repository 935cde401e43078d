// The roofline lines of bench_gpu: each main op of a layer at the throughput table's shape, its
// bytes and FLOPs, the time they take at the machine's measured copy bandwidth and GEMM rate,
// and its measured time beside it (included by bench_gpu.cpp only).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_gpu.h"
#include "runtime/allocator.h"
#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/kernels/cuda/stream.h"
#include "runtime/ops.h"
#include "runtime/tensor.h"

namespace bench_gpu::roofline {

using runtime::DType;
using runtime::Tensor;

// Mean milliseconds of `reps` runs of `op` on the context's stream, after one warmup run.
inline double time_ms(runtime::cuda::CudaContext& context, int reps,
                      const std::function<void()>& op) {
  op();
  const runtime::cuda::CudaEvent start(true), stop(true);
  start.record(context.stream());
  for (int i = 0; i < reps; ++i) op();
  stop.record(context.stream());
  stop.synchronize();
  return stop.elapsed_ms_since(start) / reps;
}

// The shape's tensors, bf16 activations as the table runs them.
class Tensors {
 public:
  explicit Tensors(runtime::Allocator& allocator) : allocator_(allocator) {}
  Tensor make(const runtime::Shape& shape, DType dtype = DType::bf16) {
    Tensor t = Tensor::empty(allocator_, shape, dtype, runtime::MemoryCategory::workspace);
    runtime::ops::zero(t);
    return t;
  }

 private:
  runtime::Allocator& allocator_;
};

inline Machine measure_machine(const BenchShape& shape, runtime::cuda::CudaContext& context,
                               Tensors& tensors) {
  Machine machine;
  const int64_t copy_elements = shape.roofline_copy_elements;
  const Tensor from = tensors.make({copy_elements}), to = tensors.make({copy_elements});
  const double copy_ms = time_ms(context, 5, [&] { runtime::ops::copy(to, from); });
  machine.copy_bytes_per_s = 2.0 * static_cast<double>(from.nbytes()) / (copy_ms * 1e-3);
  const int64_t gemm = shape.roofline_gemm;
  const Tensor a = tensors.make({gemm, gemm}), w = tensors.make({gemm, gemm});
  const Tensor c = tensors.make({gemm, gemm});
  const double gemm_ms = time_ms(context, 5, [&] {
    runtime::ops::linear_forward({.out = c,
                                  .input = a,
                                  .weight = w,
                                  .rows = gemm,
                                  .in_features = gemm,
                                  .out_features = gemm});
  });
  machine.gemm_flops_per_s = 2.0 * gemm * gemm * gemm / (gemm_ms * 1e-3);
  return machine;
}

// Bytes of n bf16 elements.
inline double bf16_bytes(int64_t n) {
  return 2.0 * static_cast<double>(n);
}

// A linear layer's forward and backward (rows, in) -> (rows, out), bf16 with fp32 gradients.
inline void linear_lines(const std::string& name, int64_t rows, int64_t in, int64_t out,
                         runtime::cuda::CudaContext& context, Tensors& tensors,
                         std::vector<Line>& lines) {
  const Tensor x = tensors.make({rows, in}), w = tensors.make({out, in}), b = tensors.make({out});
  const Tensor y = tensors.make({rows, out}), dx = tensors.make({rows, in});
  const Tensor dw = tensors.make({out, in}, DType::f32), db = tensors.make({out}, DType::f32);
  const double product = 2.0 * static_cast<double>(rows) * in * out;
  lines.push_back({name + " forward", bf16_bytes(rows * in + in * out + rows * out + out), product,
                   0, time_ms(context, 5, [&] {
                     runtime::ops::linear_forward({.out = y,
                                                   .input = x,
                                                   .weight = w,
                                                   .bias = b,
                                                   .rows = rows,
                                                   .in_features = in,
                                                   .out_features = out});
                   })});
  lines.push_back({name + " backward",
                   bf16_bytes(2 * rows * out + 2 * rows * in + in * out) + 8.0 * in * out,
                   2 * product, 0, time_ms(context, 5, [&] {
                     runtime::ops::linear_backward({.dinput = dx,
                                                    .dweight = dw,
                                                    .dbias = db,
                                                    .dout = y,
                                                    .input = x,
                                                    .weight = w,
                                                    .rows = rows,
                                                    .in_features = in,
                                                    .out_features = out});
                   })});
}

// The MLP's fused ops (Note [MLP epilogues] in runtime/op_args.h): fc1 with its GELU, and fc2's
// backward through that GELU with fc1's bias gradient, beside the unfused lines of the same ops.
inline void mlp_epilogue_lines(int64_t rows, int64_t h, runtime::cuda::CudaContext& context,
                               Tensors& tensors, std::vector<Line>& lines) {
  const int64_t ffn = 4 * h;
  const auto tanh = runtime::GeluKind::tanh;
  const Tensor x = tensors.make({rows, h}), w1 = tensors.make({ffn, h}), b1 = tensors.make({ffn});
  const Tensor pre = tensors.make({rows, ffn}), act = tensors.make({rows, ffn});
  const double product = 2.0 * static_cast<double>(rows) * h * ffn;
  lines.push_back({"fc1 + gelu forward (fused)", bf16_bytes(rows * h + h * ffn + 2 * rows * ffn),
                   product, 0, time_ms(context, 5, [&] {
                     runtime::ops::linear_gelu_forward({.out = act,
                                                        .pre_activation = pre,
                                                        .input = x,
                                                        .weight = w1,
                                                        .bias = b1,
                                                        .rows = rows,
                                                        .in_features = h,
                                                        .out_features = ffn,
                                                        .kind = tanh});
                   })});
  const Tensor w2 = tensors.make({h, ffn}), dout = tensors.make({rows, h});
  const Tensor dact = tensors.make({rows, ffn});
  const Tensor dw2 = tensors.make({h, ffn}, DType::f32), db2 = tensors.make({h}, DType::f32);
  const Tensor db1 = tensors.make({ffn}, DType::f32);
  lines.push_back({"fc2 + gelu backward (fused)",
                   bf16_bytes(2 * rows * h + 3 * rows * ffn + h * ffn) + 8.0 * h * ffn, 2 * product,
                   0, time_ms(context, 5, [&] {
                     runtime::ops::gelu_linear_backward({.dinput = dact,
                                                         .dweight = dw2,
                                                         .dbias = db2,
                                                         .pre_bias = db1,
                                                         .dout = dout,
                                                         .input = act,
                                                         .weight = w2,
                                                         .pre_activation = pre,
                                                         .rows = rows,
                                                         .in_features = ffn,
                                                         .out_features = h,
                                                         .kind = tanh});
                   })});
}

// The elementwise and row ops of one layer: layernorm, GELU, dropout + residual add, add, and
// the unfused attention's causal softmax and score product.
inline void pointwise_lines(const BenchShape& s, runtime::cuda::CudaContext& context,
                            Tensors& tensors, std::vector<Line>& lines) {
  const int64_t rows = s.table_seq_length * s.table_micro_batch, h = s.hidden_size;
  const int64_t ffn = 4 * h, T = s.table_seq_length, heads = s.num_attention_heads;
  const int64_t BH = s.table_micro_batch * heads, D = h / heads;
  const Tensor x = tensors.make({rows, h}), y = tensors.make({rows, h}),
               r = tensors.make({rows, h});
  const Tensor g = tensors.make({h}), beta = tensors.make({h});
  const Tensor mean = tensors.make({rows}, DType::f32), rstd = tensors.make({rows}, DType::f32);
  const Tensor mask = tensors.make({rows, h}, DType::u8);
  lines.push_back({"layernorm forward", bf16_bytes(2 * rows * h + 2 * h) + 8.0 * rows,
                   10.0 * rows * h, 0, time_ms(context, 10, [&] {
                     runtime::ops::layernorm_forward({.out = y,
                                                      .mean = mean,
                                                      .rstd = rstd,
                                                      .input = x,
                                                      .weight = g,
                                                      .bias = beta,
                                                      .rows = rows,
                                                      .channels = h,
                                                      .eps = 1e-5f});
                   })});
  const Tensor dg = tensors.make({h}, DType::f32), dbeta = tensors.make({h}, DType::f32);
  lines.push_back({"layernorm backward", bf16_bytes(4 * rows * h) + 8.0 * rows + 8.0 * h,
                   14.0 * rows * h, 0, time_ms(context, 10, [&] {
                     runtime::ops::layernorm_backward({.dinput = r,
                                                       .dweight = dg,
                                                       .dbias = dbeta,
                                                       .dout = y,
                                                       .input = x,
                                                       .weight = g,
                                                       .mean = mean,
                                                       .rstd = rstd,
                                                       .rows = rows,
                                                       .channels = h});
                   })});
  const Tensor f = tensors.make({rows, ffn});
  lines.push_back(
      {"gelu forward", bf16_bytes(2 * rows * ffn), 20.0 * rows * ffn, 0, time_ms(context, 10, [&] {
         runtime::ops::gelu_forward(
             {.out = f, .input = f, .count = rows * ffn, .kind = runtime::GeluKind::tanh});
       })});
  const Tensor df = tensors.make({rows, ffn});
  lines.push_back(
      {"gelu backward", bf16_bytes(3 * rows * ffn), 30.0 * rows * ffn, 0, time_ms(context, 10, [&] {
         runtime::ops::gelu_backward({.dinput = df,
                                      .dout = df,
                                      .input = f,
                                      .count = rows * ffn,
                                      .kind = runtime::GeluKind::tanh});
       })});
  lines.push_back({"dropout + residual add", bf16_bytes(3 * rows * h) + rows * h, 3.0 * rows * h, 0,
                   time_ms(context, 10, [&] {
                     runtime::ops::dropout_add_hidden_forward(
                         {.out = y,
                          .mask = mask,
                          .residual = r,
                          .input = x,
                          .seq = T,
                          .micro_batch = s.table_micro_batch,
                          .channels = h,
                          .seq_offset = 0,
                          .sample_offset = 0,
                          .drop_probability = static_cast<float>(s.dropout),
                          .key = {1, 2}});
                   })});
  lines.push_back(
      {"add", bf16_bytes(3 * rows * h), static_cast<double>(rows * h), 0, time_ms(context, 10, [&] {
         runtime::ops::add({.out = y, .a = x, .b = r, .count = rows * h});
       })});
  const Tensor scores = tensors.make({BH, T, T});
  lines.push_back({"causal softmax forward", bf16_bytes(2 * BH * T * T),
                   5.0 * static_cast<double>(BH) * T * T / 2, 0, time_ms(context, 5, [&] {
                     runtime::ops::causal_softmax_forward(
                         {.probs = scores, .scores = scores, .batch_heads = BH, .seq = T});
                   })});
  const Tensor q = tensors.make({BH, T, D}), k = tensors.make({BH, T, D});
  lines.push_back({"attention scores forward", bf16_bytes(2 * BH * T * D + BH * T * T),
                   2.0 * static_cast<double>(BH) * T * T * D, 0, time_ms(context, 5, [&] {
                     runtime::ops::attention_scores_forward({.scores = scores,
                                                             .q = q,
                                                             .k = k,
                                                             .batch_heads = BH,
                                                             .seq = T,
                                                             .head_dim = D,
                                                             .scale = 0.125f});
                   })});
}

// The Llama block's own row and elementwise ops: RMSNorm, SwiGLU and the rotary embedding of
// the fused qkv activations, then the residual add (no dropout in this block).
inline void llama_lines(const BenchShape& s, runtime::cuda::CudaContext& context, Tensors& tensors,
                        std::vector<Line>& lines) {
  const int64_t rows = s.table_seq_length * s.table_micro_batch, h = s.hidden_size;
  const int64_t ffn = s.ffn();
  const Tensor x = tensors.make({rows, h}), y = tensors.make({rows, h}),
               dx = tensors.make({rows, h});
  const Tensor g = tensors.make({h}), dg = tensors.make({h}, DType::f32);
  const Tensor rstd = tensors.make({rows}, DType::f32);
  lines.push_back({"rmsnorm forward", bf16_bytes(2 * rows * h + h) + 4.0 * rows, 4.0 * rows * h, 0,
                   time_ms(context, 10, [&] {
                     runtime::ops::rmsnorm_forward({.out = y,
                                                    .rstd = rstd,
                                                    .input = x,
                                                    .weight = g,
                                                    .rows = rows,
                                                    .channels = h,
                                                    .eps = 1e-5f});
                   })});
  lines.push_back({"rmsnorm backward", bf16_bytes(4 * rows * h) + 4.0 * rows + 4.0 * h,
                   8.0 * rows * h, 0, time_ms(context, 10, [&] {
                     runtime::ops::rmsnorm_backward({.dinput = dx,
                                                     .dweight = dg,
                                                     .dout = y,
                                                     .input = x,
                                                     .weight = g,
                                                     .rstd = rstd,
                                                     .rows = rows,
                                                     .channels = h});
                   })});
  const Tensor gate_up = tensors.make({rows, 2 * ffn}), act = tensors.make({rows, ffn});
  lines.push_back(
      {"swiglu forward", bf16_bytes(3 * rows * ffn), 6.0 * rows * ffn, 0, time_ms(context, 10, [&] {
         runtime::ops::swiglu_forward({.out = act, .input = gate_up, .rows = rows, .ffn = ffn});
       })});
  const Tensor dgate_up = tensors.make({rows, 2 * ffn});
  lines.push_back(
      {"swiglu backward", bf16_bytes(5 * rows * ffn), 10.0 * rows * ffn, 0,
       time_ms(context, 10, [&] {
         runtime::ops::swiglu_backward(
             {.dinput = dgate_up, .dout = act, .input = gate_up, .rows = rows, .ffn = ffn});
       })});
  const int64_t kv_heads = s.kv_heads(), group_size = s.num_attention_heads / kv_heads;
  const Tensor qkv = tensors.make({rows, s.qkv_width()});
  const int64_t rotated = rows * (s.num_attention_heads + kv_heads) * s.head_dim();
  lines.push_back(
      {"rope forward", bf16_bytes(2 * rotated), 3.0 * rotated, 0, time_ms(context, 10, [&] {
         runtime::ops::rope_forward({.qkv = qkv,
                                     .seq = s.table_seq_length,
                                     .micro_batch = s.table_micro_batch,
                                     .kv_heads = kv_heads,
                                     .group_size = group_size,
                                     .head_dim = s.head_dim(),
                                     .seq_offset = 0,
                                     .base = static_cast<float>(s.rotary_base)});
       })});
  lines.push_back(
      {"add", bf16_bytes(3 * rows * h), static_cast<double>(rows * h), 0, time_ms(context, 10, [&] {
         runtime::ops::add({.out = y, .a = x, .b = dx, .count = rows * h});
       })});
}

// Every line at the throughput table's shape, with its limit at `machine`'s rates.
inline std::vector<Line> measure_lines(const BenchShape& s, const Machine& machine,
                                       runtime::cuda::CudaContext& context, Tensors& tensors) {
  const int64_t rows = s.table_seq_length * s.table_micro_batch, h = s.hidden_size;
  std::vector<Line> lines;
  linear_lines("qkv", rows, h, s.qkv_width(), context, tensors, lines);
  linear_lines("proj", rows, h, h, context, tensors, lines);
  linear_lines("fc1", rows, h, s.fc1_width(), context, tensors, lines);
  linear_lines("fc2", rows, s.ffn(), h, context, tensors, lines);
  if (s.is_llama()) {
    llama_lines(s, context, tensors, lines);
  } else {
    mlp_epilogue_lines(rows, h, context, tensors, lines);
    pointwise_lines(s, context, tensors, lines);
  }
  for (Line& line : lines) {
    line.limit_ms = 1e3 * std::max(line.bytes / machine.copy_bytes_per_s,
                                   line.flops / machine.gemm_flops_per_s);
  }
  return lines;
}

inline void print(const Machine& machine, const std::vector<Line>& lines) {
  std::printf("\nroofline at the table's shape: copy %.0f GB/s, bf16 GEMM %.3g TFLOP/s\n",
              machine.copy_bytes_per_s * 1e-9, machine.gemm_flops_per_s * 1e-12);
  std::printf("  %-28s %10s %10s %10s %10s %8s\n", "op", "MB", "GFLOP", "limit ms", "ms",
              "x limit");
  for (const Line& line : lines) {
    std::printf("  %-28s %10.1f %10.2f %10.3f %10.3f %8.2f\n", line.op.c_str(), line.bytes * 1e-6,
                line.flops * 1e-9, line.limit_ms, line.measured_ms,
                line.measured_ms / line.limit_ms);
  }
}

}  // namespace bench_gpu::roofline
