// The compute rows' machinery: op_row runs one random case of an operator on the host and on
// two device twins, and compares every tensor of its argument struct (found by for_each_field,
// so a row names no tensor twice). Included by the row files only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "runtime/ops.h"
#include "tests/support/struct_fields.h"
#include "tests/unit/ops/twin_harness.h"

namespace op_twins {

using runtime::DType;
using runtime::Tensor;

inline constexpr Tolerance kExact{0, 0};
// GEMMs (f32 without TF32; bf16 inputs rounded alike) and reductions in another order.
inline constexpr Tolerance kReordered{1e-5, 1e-2};
// The host sums up to 4099 floats in float, in order (the device in another order).
inline constexpr Tolerance kHostFloatSum{1e-4, 1e-2};
// f32 only (no activation tensor): CUDA's logf against the host's.
inline constexpr Tolerance kF32Math{1e-5, 1e-5};

template <class Args, class F>
void for_each_tensor(Args& args, F&& f) {
  test_support::for_each_field(args, [&](auto& field) {
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, Tensor>) f(field);
  });
}

template <class Args>
std::vector<Tensor> tensors(Args args) {
  std::vector<Tensor> out;
  for_each_tensor(args, [&](Tensor& t) { out.push_back(t); });
  return out;
}

// The tensor index of field `member` in Args, or -1.
template <class Args>
int tensor_index(Tensor Args::*member) {
  if (member == nullptr) return -1;
  Args probe{};
  int index = 0, found = -1;
  for_each_tensor(probe, [&](Tensor& t) {
    if (&t == &(probe.*member)) found = index;
    ++index;
  });
  return found;
}

// One case of a compute op: the host args, then two device twins of them (whose results must be
// identical: device ops are deterministic), then every tensor compared (Mirror::expect_match).
// causal_index: the tensor whose (seq, seq) matrices the op leaves unspecified above the
// diagonal, or -1.
template <class Args, class Result>
void run_compute_case(Result (*run)(const Args&), const Args& host, const Case& c,
                      TwinDevice& device, const Tolerance& tolerance, int causal_index) {
  Mirror first(c, device), second(c, device);
  Args twin = host, again = host;
  for_each_tensor(twin, [&](Tensor& t) { t = first.device_twin(t); });
  for_each_tensor(again, [&](Tensor& t) { t = second.device_twin(t); });
  if constexpr (std::is_void_v<Result>) {
    run(host);
    run(twin);
    run(again);
  } else {
    const double device_result = run(twin);
    expect_scalar_match(device_result, run(host), device.exact());
    EXPECT_EQ(run(again), device_result) << "two device runs differ";
  }
  int64_t causal_seq = 0;
  if constexpr (requires { host.seq; }) causal_seq = host.seq;
  first.expect_match(tensors(host), tolerance, causal_index, causal_seq);
  const std::vector<Tensor> twins = tensors(twin), agains = tensors(again);
  for (size_t i = 0; i < twins.size(); ++i) {
    if (twins[i].defined()) expect_same_bytes(twins[i], agains[i], static_cast<int>(i));
  }
}

// The row of compute op `op` (ops::op itself as `run`): build(Case&) returns one random case's
// host args. causal_output: an output whose entries above the diagonal the op leaves unspecified.
template <class Args, class Result, class Build>
Row op_row(const char* op, Result (*run)(const Args&), Tolerance tolerance, Build build,
           Tensor Args::*causal_output = nullptr) {
  return Row{op, [=](TwinDevice& device, uint32_t seed, DType activation) {
               Case c(seed, activation);
               const Args host = build(c);
               run_compute_case(run, host, c, device, tolerance, tensor_index(causal_output));
             }};
}

// The rows, by file: op_twin_rows.cpp (layers), op_twin_rows_llama.cpp (the Llama-family
// blocks), op_twin_rows_loss.cpp (loss, attention, vectors, the optimizer),
// op_twin_rows_flash_block.cpp (ring attention's blocks), op_twin_rows_memory.cpp (memory
// operators).
std::vector<Row> layer_rows();
std::vector<Row> llama_rows();
std::vector<Row> loss_and_attention_rows();
std::vector<Row> flash_block_rows();
std::vector<Row> vector_rows();
std::vector<Row> memory_rows();

// Random document starts (Note [Document masking] in runtime/op_args.h) of `rows` query rows at
// global positions q_position on, (rows, micro_batch) i32, in three cases of four (else undefined:
// one document). Per sample, end-of-document tokens at 1, 3 or 8 random positions before the
// last row, and one just before a random row, which then starts its document (a lone key: Note
// [Lone key in the twins]); a row's start is the position after the last token before it, or 0.
inline Tensor random_document_starts(Case& c, int64_t rows, int64_t micro_batch,
                                     int64_t q_position = 0) {
  if (c.pick({0, 1, 1, 1}) == 0) return Tensor();
  const Tensor starts = c.zeros({rows, micro_batch}, DType::i32);
  const auto below = [&c](int64_t n) {  // uniform in [0, n)
    return std::min(n - 1, static_cast<int64_t>(c.uniform(0.f, static_cast<float>(n))));
  };
  for (int64_t b = 0; b < micro_batch; ++b) {
    std::vector<int64_t> ends = {q_position + below(rows) - 1};  // -1: ends nothing
    for (int64_t count = c.pick({1, 3, 8}); count > 0; --count)
      ends.push_back(below(q_position + rows));
    std::sort(ends.begin(), ends.end());
    size_t next = 0;
    int64_t start = 0;
    for (int64_t i = 0; i < rows; ++i) {
      while (next < ends.size() && ends[next] < q_position + i) start = ends[next++] + 1;
      starts.i32()[i * micro_batch + b] = static_cast<int32_t>(start);
    }
  }
  return starts;
}

// Note [Lone key in the twins]
// Global query 0 sees one key, so its softmax is the constant 1 and its dS exactly 0: the device
// writes that 0 (Note [Flash attention on CUDA]), the host the rounding of dP F - Delta, which
// with a bf16 ctx (Delta taken from the rounded output) reaches about 2^-8 of |dO| |O| summed
// over head_dim, and a case whose only query is query 0 (seq_len 1) has no larger gradient to
// measure it against. So the flash backward rows give query 0 a zero output gradient: both sides
// then add exactly 0 through it. They do the same for every other lone query: every query with
// a sliding window of one key, and with documents every query at its document's start (Note
// [Document masking] in runtime/op_args.h). dctx: (seq, micro_batch, heads * head_dim), row i the
// query at global position dims.q_position + i; document_starts: (seq, micro_batch), or undefined.
inline void zero_lone_key_rows(const Tensor& dctx, const runtime::FlashAttentionDims& dims,
                               const Tensor& document_starts) {
  const int64_t width = dims.heads * dims.head_dim;
  for (int64_t row = 0; row < dims.seq_len * dims.micro_batch; ++row) {  // row = i * B + b
    const int64_t position = dims.q_position + row / dims.micro_batch;
    const int64_t start = document_starts.defined() ? document_starts.i32()[row] : 0;
    if (dims.window == 1 || start == position) std::fill_n(dctx.f32() + row * width, width, 0.f);
  }
}

// A compute row: TWIN_ROW(op, tolerance, build[, causal_output]).
#define TWIN_ROW(op, ...) ::op_twins::op_row(#op, &::runtime::ops::op, __VA_ARGS__)

}  // namespace op_twins
