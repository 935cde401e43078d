// The tensor-parallel linears: each GEMM with the collective its role asks for, forward and
// backward in the order the memory model replays (temporaries allocated before they are filled).
#include "model/tensor_parallel_linear.h"

#include "parallel/core/mappings.h"
#include "runtime/memory_timeline.h"
#include "runtime/ops.h"

namespace model {

namespace ops = runtime::ops;

Tensor sequence_shard(const LayerDims& d, int64_t width, runtime::Allocator& allocator,
                      const char* name) {
  const runtime::memory_timeline::Name timeline_name(name);
  return Tensor::empty(allocator, {d.seq_shard(), d.micro_batch, width}, d.activation_dtype,
                       runtime::MemoryCategory::workspace);
}

Tensor full_sequence(const LayerDims& d, int64_t width, runtime::Allocator& allocator,
                     const char* name) {
  const runtime::memory_timeline::Name timeline_name(name);
  return Tensor::empty(allocator, {d.seq, d.micro_batch, width}, d.activation_dtype,
                       runtime::MemoryCategory::workspace);
}

Tensor column_parallel_input(const Tensor& shard, const LayerDims& d, const LayerGroups& groups,
                             runtime::Allocator& allocator) {
  if (!d.sequence_parallel || d.tp_size == 1) return shard;
  Tensor full = full_sequence(d, shard.dim(2), allocator, "sp_gathered_input");
  parallel::gather_from_sp_forward(*groups.tp, full, shard);
  return full;
}

Tensor column_parallel_input_grad(const Tensor& dfull, const LayerDims& d,
                                  const LayerGroups& groups, runtime::Allocator& allocator) {
  if (d.tp_size == 1) return dfull;
  if (!d.sequence_parallel) {
    parallel::copy_to_tp_backward(*groups.tp, dfull);
    return dfull;
  }
  Tensor shard = sequence_shard(d, dfull.dim(2), allocator, "sp_scattered_dinput");
  parallel::gather_from_sp_backward(*groups.tp, shard, dfull);
  return shard;
}

void column_parallel_linear(const Tensor& out, const Tensor& input, const Tensor& weight,
                            const Tensor& bias, int64_t out_features, const LayerDims& d,
                            const LayerGroups& groups, runtime::Allocator& allocator) {
  const Tensor input_full = column_parallel_input(input, d, groups, allocator);
  ops::linear_forward({.out = out,
                       .input = input_full,
                       .weight = weight,
                       .bias = bias,
                       .rows = d.seq * d.micro_batch,
                       .in_features = d.hidden,
                       .out_features = out_features});
}

Tensor row_parallel_linear(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           int64_t in_features, const LayerDims& d, const LayerGroups& groups,
                           runtime::Allocator& allocator) {
  const int64_t rows = d.seq * d.micro_batch, C = d.hidden;
  Tensor out = full_sequence(d, C, allocator, "row_parallel_out");
  ops::linear_forward({.out = out,
                       .input = input,
                       .weight = weight,
                       .bias = d.tp_size == 1 ? bias : Tensor(),
                       .rows = rows,
                       .in_features = in_features,
                       .out_features = C});
  if (d.tp_size == 1) return out;
  if (d.sequence_parallel) {
    Tensor shard = sequence_shard(d, C, allocator, "sp_scattered_out");
    parallel::reduce_scatter_to_sp_forward(*groups.tp, shard, out);
    out = shard;
  } else {
    parallel::reduce_from_tp_forward(*groups.tp, out);
  }
  if (bias.defined())
    ops::add_bias({.out = out, .bias = bias, .rows = d.seq_shard() * d.micro_batch, .cols = C});
  return out;
}

Tensor row_parallel_output_grad(const Tensor& dshard, const LayerDims& d, const LayerGroups& groups,
                                runtime::Allocator& allocator) {
  if (!d.sequence_parallel || d.tp_size == 1) return dshard;
  Tensor full = full_sequence(d, dshard.dim(2), allocator, "sp_gathered_dout");
  parallel::reduce_scatter_to_sp_backward(*groups.tp, full, dshard);
  return full;
}

Tensor row_parallel_linear_backward(const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                                    const Tensor& input, const Tensor& weight, int64_t in_features,
                                    const LayerDims& d, const LayerGroups& groups,
                                    runtime::Allocator& allocator) {
  Tensor dinput = full_sequence(d, in_features, allocator, "row_parallel_dinput");
  const Tensor dout_full = row_parallel_output_grad(dout, d, groups, allocator);
  ops::linear_backward({.dinput = dinput,
                        .dweight = dweight,
                        .dbias = dbias,
                        .dout = dout_full,
                        .input = input,
                        .weight = weight,
                        .rows = d.seq * d.micro_batch,
                        .in_features = in_features,
                        .out_features = d.hidden});
  return dinput;
}

}  // namespace model
