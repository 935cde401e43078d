// Tensor-parallel linears as roles (Megatron-Core's ColumnParallelLinear / RowParallelLinear):
// the model asks for a column- or row-parallel product of a layer's hidden states and these
// call the collectives of parallel/core/mappings.h. (A column-parallel backward is the
// caller's linear_backward between column_parallel_input and column_parallel_input_grad.) Rules:
// outputs and input gradients are assigned (=), weight and bias gradients accumulate (+=);
// temporaries are workspace.
#pragma once

#include <cstdint>

#include "model/layer_stash.h"
#include "runtime/tensor.h"

namespace model {

using runtime::Tensor;

// Workspace temporaries of the activations' type: this rank's rows (Ts, B, width) and the
// whole sequence (T, B, width); `name` is the tensor's in a memory timeline (a static text).
Tensor sequence_shard(const LayerDims& d, int64_t width, runtime::Allocator& allocator,
                      const char* name);
Tensor full_sequence(const LayerDims& d, int64_t width, runtime::Allocator& allocator,
                     const char* name);

// The full-sequence input of a column-parallel GEMM: gather_from_sp forward under sequence
// parallelism (copy_to_tp's forward is the identity), else `shard` itself.
Tensor column_parallel_input(const Tensor& shard, const LayerDims& d, const LayerGroups& groups,
                             runtime::Allocator& allocator);
// The input gradient of a column-parallel GEMM, back to this rank's rows: gather_from_sp
// backward (reduce-scatter) or copy_to_tp backward (all-reduce, in place).
Tensor column_parallel_input_grad(const Tensor& dfull, const LayerDims& d,
                                  const LayerGroups& groups, runtime::Allocator& allocator);

// out (T, B, out_features) = column-parallel linear of this rank's (Ts, B, C) input rows.
void column_parallel_linear(const Tensor& out, const Tensor& input, const Tensor& weight,
                            const Tensor& bias, int64_t out_features, const LayerDims& d,
                            const LayerGroups& groups, runtime::Allocator& allocator);
// out (Ts, B, C) = row-parallel linear of (T, B, in_features): partial products summed over
// the group (reduce_from_tp, or reduce_scatter_to_sp), then the bias once.
Tensor row_parallel_linear(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           int64_t in_features, const LayerDims& d, const LayerGroups& groups,
                           runtime::Allocator& allocator);
// The output gradient of a row-parallel GEMM over the full sequence: reduce_scatter_to_sp
// backward (all-gather); reduce_from_tp backward is the identity.
Tensor row_parallel_output_grad(const Tensor& dshard, const LayerDims& d, const LayerGroups& groups,
                                runtime::Allocator& allocator);
// row_parallel_linear in reverse: returns dinput (T, B, in_features) (=); dweight, dbias (+=).
Tensor row_parallel_linear_backward(const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                                    const Tensor& input, const Tensor& weight, int64_t in_features,
                                    const LayerDims& d, const LayerGroups& groups,
                                    runtime::Allocator& allocator);

}  // namespace model
