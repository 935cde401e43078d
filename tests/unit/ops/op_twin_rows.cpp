// One twin row per operator of TRAINER_OPS: a builder of one random case on host tensors, and
// its tolerance on a device that is not exact (Note [Twin tolerance]). A compute row runs the op
// on the host case and on two device twins of it, and compares every tensor of the argument
// struct, inputs included; memory rows spell out their few steps.
#include <utility>
#include <vector>

#include "runtime/ops.h"
#include "tests/unit/ops/twin_row.h"

namespace op_twins {
namespace {

namespace ops = runtime::ops;

// A bias that is absent, a tensor of its own, or a view that is not 16-byte aligned.
Tensor maybe_bias(Case& c, int64_t size) {
  switch (c.pick({0, 1, 2})) {
    case 0:
      return Tensor();
    case 1:
      return c.act({size});
    default:
      return c.misaligned_act({size});
  }
}

runtime::DropoutKey random_key(Case& c) {
  return runtime::make_dropout_key(
      static_cast<uint64_t>(c.pick({1, 2, 3})), static_cast<uint64_t>(c.pick({0, 7})),
      static_cast<uint32_t>(c.pick({0, 5})), runtime::DropoutOp::mlp_out);
}

// (rows, channels) of a row-wise op: one of them, either, a long size.
std::pair<int64_t, int64_t> rows_and_channels(Case& c) {
  if (c.coin()) return {c.long_size(), c.size()};
  return {c.size(), c.long_size()};
}

// (batch_heads, seq) of attention probabilities: seq up to 1031 (rows past a block of 1024
// threads), then one head.
std::pair<int64_t, int64_t> heads_and_seq(Case& c) {
  const int64_t seq = c.pick({1, 3, 7, 33, 129, 1031});
  return {seq > 129 ? 1 : c.small_size(), seq};
}

float drop_probability(Case& c) {
  return static_cast<float>(c.pick({0, 1, 5})) / 10.f;
}

Row linear_forward_row() {
  return TWIN_ROW(linear_forward, kReordered, [](Case& c) {
    const int64_t rows = c.long_size(), in = c.size(), out = c.size();
    return ops::LinearForward{.out = c.act({rows, out}),
                              .input = c.act({rows, in}, -2.f, 2.f),
                              .weight = c.act({out, in}, -.5f, .5f),
                              .bias = maybe_bias(c, out),
                              .rows = rows,
                              .in_features = in,
                              .out_features = out};
  });
}

Row linear_backward_row() {
  return TWIN_ROW(linear_backward, kReordered, [](Case& c) {
    const int64_t rows = c.long_size(), in = c.size(), out = c.size();
    return ops::LinearBackward{.dinput = c.coin() ? c.act({rows, in}) : Tensor(),
                               .dweight = c.f32({out, in}),
                               .dbias = c.coin() ? c.f32({out}) : Tensor(),
                               .dout = c.act({rows, out}),
                               .input = c.act({rows, in}, -2.f, 2.f),
                               .weight = c.act({out, in}, -.5f, .5f),
                               .rows = rows,
                               .in_features = in,
                               .out_features = out};
  });
}

// Note [MLP epilogues]: out_features a multiple of 8 reaches cuBLASLt's GELU epilogues on CUDA
// (with tanh), the other sizes and erf the composition. cuBLASLt's tanh may be a hardware
// approximation: 1e-3 in f32, as tests/gpu/test_gpu_gemm.cpp allows it.
constexpr Tolerance kGeluEpilogue{1e-3, 1e-2, false};

runtime::GeluKind gelu_kind(Case& c) {
  return c.pick({0, 0, 1}) == 0 ? runtime::GeluKind::tanh : runtime::GeluKind::erf;
}

Row linear_gelu_forward_row() {
  return TWIN_ROW(linear_gelu_forward, kGeluEpilogue, [](Case& c) {
    const int64_t rows = c.long_size(), in = c.size(), out = c.pick({8, 24, 136, 7, 33});
    return ops::LinearGeluForward{.out = c.act({rows, out}),
                                  .pre_activation = c.act({rows, out}),
                                  .input = c.act({rows, in}, -2.f, 2.f),
                                  .weight = c.act({out, in}, -.5f, .5f),
                                  .bias = c.coin() ? c.act({out}) : c.misaligned_act({out}),
                                  .rows = rows,
                                  .in_features = in,
                                  .out_features = out,
                                  .kind = gelu_kind(c)};
  });
}

Row gelu_linear_backward_row() {
  return TWIN_ROW(gelu_linear_backward, kGeluEpilogue, [](Case& c) {
    const int64_t rows = c.long_size(), in = c.pick({8, 24, 136, 7, 33}), out = c.size();
    const Tensor pre_activation = c.act({rows, in}, -3.f, 3.f);
    const runtime::GeluKind kind = gelu_kind(c);
    const Tensor input = c.act({rows, in});
    ops::gelu_forward({.out = input, .input = pre_activation, .count = rows * in, .kind = kind});
    c.settle(input);  // the GELU of pre_activation, as the forward left it
    return ops::GeluLinearBackward{.dinput = c.act({rows, in}),
                                   .dweight = c.f32({out, in}),
                                   .dbias = c.coin() ? c.f32({out}) : Tensor(),
                                   .pre_bias = c.f32({in}),
                                   .dout = c.act({rows, out}),
                                   .input = input,
                                   .weight = c.act({out, in}, -.5f, .5f),
                                   .pre_activation = pre_activation,
                                   .rows = rows,
                                   .in_features = in,
                                   .out_features = out,
                                   .kind = kind};
  });
}

Row layernorm_forward_row() {
  return TWIN_ROW(layernorm_forward, kReordered, [](Case& c) {
    const auto [rows, channels] = rows_and_channels(c);
    return ops::LayernormForward{.out = c.act({rows, channels}),
                                 .mean = c.f32({rows}),
                                 .rstd = c.f32({rows}),
                                 .input = c.act({rows, channels}, -2.f, 4.f),
                                 .weight = c.act({channels}),
                                 .bias = c.act({channels}),
                                 .rows = rows,
                                 .channels = channels,
                                 .eps = 1e-5f};
  });
}

Row layernorm_backward_row() {
  return TWIN_ROW(layernorm_backward, kReordered, [](Case& c) {
    const auto [rows, channels] = rows_and_channels(c);
    ops::LayernormForward forward{.out = c.act({rows, channels}),
                                  .mean = c.f32({rows}),
                                  .rstd = c.f32({rows}),
                                  .input = c.act({rows, channels}, -2.f, 4.f),
                                  .weight = c.act({channels}),
                                  .bias = c.act({channels}),
                                  .rows = rows,
                                  .channels = channels,
                                  .eps = 1e-5f};
    ops::layernorm_forward(forward);  // statistics that belong to the input
    return ops::LayernormBackward{.dinput = c.act({rows, channels}),
                                  .dweight = c.f32({channels}),
                                  .dbias = c.f32({channels}),
                                  .dout = c.act({rows, channels}),
                                  .input = forward.input,
                                  .weight = forward.weight,
                                  .mean = forward.mean,
                                  .rstd = forward.rstd,
                                  .rows = rows,
                                  .channels = channels};
  });
}

std::vector<Row> linear_and_layernorm_rows() {
  return {linear_forward_row(),       linear_backward_row(),   linear_gelu_forward_row(),
          gelu_linear_backward_row(), layernorm_forward_row(), layernorm_backward_row()};
}

// A sliding window over seq keys (Note [Sliding window] in runtime/op_args.h): none, one key, a
// few, about half of them, or more than all (which masks nothing).
int64_t random_window(Case& c, int64_t seq) {
  return c.pick({0, 1, 5, seq / 2 + 1, seq + 3});
}

// The documents of a softmax's seq rows (random_document_starts) in each of its micro_batch
// samples.
struct SoftmaxDocuments {
  Tensor starts;  // (seq, micro_batch) i32, or undefined: one document
  int64_t micro_batch = 1;
};

// A softmax's shape and documents: 1 or 2 samples of heads_and_seq's heads.
struct SoftmaxCase {
  int64_t batch_heads, seq;
  SoftmaxDocuments documents;
};
SoftmaxCase random_softmax(Case& c) {
  const auto [heads, seq] = heads_and_seq(c);
  const int64_t micro_batch = c.pick({1, 2});
  return {micro_batch * heads, seq, {random_document_starts(c, seq, micro_batch), micro_batch}};
}

// A causal softmax output of (batch_heads, seq, seq) from random scores, rounded like its twin.
Tensor random_probs(Case& c, int64_t batch_heads, int64_t seq, int64_t window = 0,
                    const SoftmaxDocuments& documents = {}) {
  const Tensor probs = c.act({batch_heads, seq, seq});
  ops::causal_softmax_forward({.probs = probs,
                               .scores = c.act({batch_heads, seq, seq}, -3.f, 3.f),
                               .batch_heads = batch_heads,
                               .seq = seq,
                               .window = window,
                               .document_starts = documents.starts,
                               .micro_batch = documents.micro_batch});
  c.settle(probs);
  return probs;
}

Row causal_softmax_forward_row() {
  return TWIN_ROW(causal_softmax_forward, kReordered, [](Case& c) {
    const auto [batch_heads, seq, documents] = random_softmax(c);
    const Tensor scores = c.act({batch_heads, seq, seq}, -3.f, 3.f);
    return ops::CausalSoftmaxForward{.probs = c.coin() ? scores : c.act({batch_heads, seq, seq}),
                                     .scores = scores,
                                     .batch_heads = batch_heads,
                                     .seq = seq,
                                     .window = random_window(c, seq),
                                     .document_starts = documents.starts,
                                     .micro_batch = documents.micro_batch};
  });
}

Row causal_softmax_backward_row() {
  return TWIN_ROW(causal_softmax_backward, kReordered, [](Case& c) {
    const auto [batch_heads, seq, documents] = random_softmax(c);
    const int64_t window = random_window(c, seq);
    const Tensor dprobs = c.act({batch_heads, seq, seq});
    return ops::CausalSoftmaxBackward{.dscores = c.coin() ? dprobs : c.act({batch_heads, seq, seq}),
                                      .dprobs = dprobs,
                                      .probs = random_probs(c, batch_heads, seq, window, documents),
                                      .batch_heads = batch_heads,
                                      .seq = seq,
                                      .window = window,
                                      .document_starts = documents.starts,
                                      .micro_batch = documents.micro_batch};
  });
}

Row gelu_forward_row() {
  return TWIN_ROW(gelu_forward, kReordered, [](Case& c) {
    const int64_t count = c.long_size() * c.small_size();
    const Tensor input = c.act({count}, -4.f, 4.f);
    return ops::GeluForward{.out = c.coin() ? input : c.act({count}),
                            .input = input,
                            .count = count,
                            .kind = c.coin() ? runtime::GeluKind::tanh : runtime::GeluKind::erf};
  });
}

Row gelu_backward_row() {
  return TWIN_ROW(gelu_backward, kReordered, [](Case& c) {
    const int64_t count = c.long_size() * c.small_size();
    const Tensor dout = c.act({count});
    return ops::GeluBackward{.dinput = c.coin() ? dout : c.act({count}),
                             .dout = dout,
                             .input = c.act({count}, -4.f, 4.f),
                             .count = count,
                             .kind = c.coin() ? runtime::GeluKind::tanh : runtime::GeluKind::erf};
  });
}

Row dropout_hidden_forward_row() {
  return TWIN_ROW(dropout_hidden_forward, kExact, [](Case& c) {
    const int64_t seq = c.size(), micro_batch = c.small_size(), channels = c.long_size();
    const Tensor input = c.act({seq, micro_batch, channels});
    return ops::DropoutHiddenForward{.out = c.coin() ? input : c.act({seq, micro_batch, channels}),
                                     .mask = c.mask({seq, micro_batch, channels}),
                                     .input = input,
                                     .seq = seq,
                                     .micro_batch = micro_batch,
                                     .channels = channels,
                                     .seq_offset = c.pick({0, 1, 5, 64}),
                                     .sample_offset = c.pick({0, 3, 11}),
                                     .drop_probability = drop_probability(c),
                                     .key = random_key(c)};
  });
}

// out = residual + dropout(input): one rounding of the float sum on the device, the host's sum
// rounded alike, so exact; p > 0 (the layer adds without the op when there is no dropout).
Row dropout_add_hidden_forward_row() {
  return TWIN_ROW(dropout_add_hidden_forward, kExact, [](Case& c) {
    const int64_t seq = c.size(), micro_batch = c.small_size(), channels = c.long_size();
    const Tensor input = c.act({seq, micro_batch, channels});
    return ops::DropoutAddHiddenForward{
        .out = c.coin() ? input : c.act({seq, micro_batch, channels}),
        .mask = c.mask({seq, micro_batch, channels}),
        .residual = c.act({seq, micro_batch, channels}),
        .input = input,
        .seq = seq,
        .micro_batch = micro_batch,
        .channels = channels,
        .seq_offset = c.pick({0, 1, 5, 64}),
        .sample_offset = c.pick({0, 3, 11}),
        .drop_probability = static_cast<float>(c.pick({1, 5, 9})) / 10.f,
        .key = random_key(c)};
  });
}

Row dropout_attention_forward_row() {
  return TWIN_ROW(dropout_attention_forward, kExact, [](Case& c) {
    const int64_t micro_batch = c.small_size(), heads = c.small_size(), seq = c.pick({1, 3, 7, 33});
    const Tensor input = random_probs(c, micro_batch * heads, seq);
    return ops::DropoutAttentionForward{
        .out = c.coin() ? input : c.act({micro_batch, heads, seq, seq}),
        .mask = c.mask({micro_batch, heads, seq, seq}),
        .input = input,
        .micro_batch = micro_batch,
        .heads = heads,
        .seq = seq,
        .head_offset = c.pick({0, 2, 5}),
        .sample_offset = c.pick({0, 3, 11}),
        .drop_probability = drop_probability(c),
        .key = random_key(c)};
  });
}

Row dropout_backward_row() {
  return TWIN_ROW(dropout_backward, kExact, [](Case& c) {
    const int64_t count = c.long_size() * c.small_size();
    const Tensor dout = c.act({count});
    return ops::DropoutBackward{.dinput = c.coin() ? dout : c.act({count}),
                                .dout = dout,
                                .mask = c.mask({count}),
                                .count = count,
                                .drop_probability = drop_probability(c)};
  });
}

std::vector<Row> softmax_gelu_dropout_rows() {
  return {causal_softmax_forward_row(),
          causal_softmax_backward_row(),
          gelu_forward_row(),
          gelu_backward_row(),
          dropout_hidden_forward_row(),
          dropout_add_hidden_forward_row(),
          dropout_attention_forward_row(),
          dropout_backward_row()};
}

Row embedding_forward_row() {
  return TWIN_ROW(embedding_forward, kExact, [](Case& c) {
    const int64_t rows = c.size(), channels = c.long_size(), vocab_start = c.pick({0, 2, 9}),
                  vocab_rows = c.pick({1, 3, 7, 33});
    return ops::EmbeddingForward{
        .out = c.act({rows, channels}),
        .tokens = c.ids({rows}, 0, vocab_start + vocab_rows + 3),  // some outside
        .wte = c.act({vocab_rows, channels}),
        .rows = rows,
        .channels = channels,
        .vocab_start = vocab_start,
        .vocab_rows = vocab_rows};
  });
}

Row embedding_backward_row() {
  return TWIN_ROW(embedding_backward, kExact, [](Case& c) {
    const int64_t rows = c.size(), channels = c.long_size(), vocab_start = c.pick({0, 2, 9}),
                  vocab_rows = c.pick({1, 3, 7, 33});
    return ops::EmbeddingBackward{
        .dwte = c.f32({vocab_rows, channels}),
        .dout = c.act({rows, channels}),
        .tokens = c.ids({rows}, 0, vocab_start + vocab_rows + 3),  // repeated ids
        .rows = rows,
        .channels = channels,
        .vocab_start = vocab_start,
        .vocab_rows = vocab_rows};
  });
}

Row position_embedding_forward_row() {
  return TWIN_ROW(position_embedding_forward, kExact, [](Case& c) {
    const int64_t seq = c.size(), micro_batch = c.small_size(), channels = c.long_size(),
                  seq_offset = c.pick({0, 1, 5});
    return ops::PositionEmbeddingForward{
        .out = c.act({seq, micro_batch, channels}),
        .wpe = c.act({seq_offset + seq + c.pick({0, 2}), channels}),
        .seq = seq,
        .micro_batch = micro_batch,
        .channels = channels,
        .seq_offset = seq_offset,
        .document_starts = random_document_starts(c, seq, micro_batch, seq_offset)};
  });
}

Row position_embedding_backward_row() {
  return TWIN_ROW(position_embedding_backward, kExact, [](Case& c) {
    const int64_t seq = c.size(), micro_batch = c.small_size(), channels = c.long_size(),
                  seq_offset = c.pick({0, 1, 5});
    return ops::PositionEmbeddingBackward{
        .dwpe = c.f32({seq_offset + seq + c.pick({0, 2}), channels}),
        .dout = c.act({seq, micro_batch, channels}),
        .seq = seq,
        .micro_batch = micro_batch,
        .channels = channels,
        .seq_offset = seq_offset,
        .document_starts = random_document_starts(c, seq, micro_batch, seq_offset)};
  });
}

std::vector<Row> embedding_rows() {
  return {embedding_forward_row(), embedding_backward_row(), position_embedding_forward_row(),
          position_embedding_backward_row()};
}

}  // namespace

std::vector<Row> layer_rows() {
  std::vector<Row> out = linear_and_layernorm_rows();
  for (auto part : {softmax_gelu_dropout_rows, embedding_rows}) {
    for (Row& row : part()) out.push_back(std::move(row));
  }
  return out;
}

const std::vector<Row>& rows() {
  static const std::vector<Row> all = [] {
    std::vector<Row> out;
    for (auto part : {layer_rows, llama_rows, loss_and_attention_rows, flash_block_rows,
                      vector_rows, memory_rows}) {
      for (Row& row : part()) out.push_back(std::move(row));
    }
    return out;
  }();
  return all;
}

}  // namespace op_twins
