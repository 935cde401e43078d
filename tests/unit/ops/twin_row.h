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

// Note [Lone key in the twins]
// Global query 0 sees one key, so its softmax is the constant 1 and its dS exactly 0: the device
// writes that 0 (Note [Flash attention on CUDA]), the host the rounding of dP F - Delta, which
// with a bf16 ctx (Delta taken from the rounded output) reaches about 2^-8 of |dO| |O| summed
// over head_dim, and a case whose only query is query 0 (seq_len 1) has no larger gradient to
// measure it against. So the flash backward rows give query 0 a zero output gradient: both sides
// then add exactly 0 through it. With a sliding window of one key every query is lone, and those
// rows zero the whole dctx instead. dctx: (seq, micro_batch, heads * head_dim), row 0 = query 0.
inline void zero_lone_key_rows(const Tensor& dctx, const runtime::FlashAttentionDims& dims) {
  std::fill_n(dctx.f32(), dims.micro_batch * dims.heads * dims.head_dim, 0.f);
}

// A compute row: TWIN_ROW(op, tolerance, build[, causal_output]).
#define TWIN_ROW(op, ...) ::op_twins::op_row(#op, &::runtime::ops::op, __VA_ARGS__)

}  // namespace op_twins
