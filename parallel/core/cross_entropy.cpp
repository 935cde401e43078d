#include "parallel/core/cross_entropy.h"

#include "runtime/ops.h"

namespace parallel {

namespace ops = runtime::ops;

void vocab_parallel_cross_entropy_forward(Communicator& tp, const VocabParallelCrossEntropy& ce) {
  // The global max, then the sum of exponentials, then the target logit.
  ops::vocab_shard_max({.row_max = ce.row_max,
                        .logits = ce.logits,
                        .rows = ce.rows,
                        .real_cols = ce.real_cols,
                        .shard_cols = ce.shard_cols});
  tp.all_reduce_max(ce.row_max);
  ops::vocab_shard_sum_exp({.row_sum = ce.lse,
                            .logits = ce.logits,
                            .row_max = ce.row_max,
                            .rows = ce.rows,
                            .real_cols = ce.real_cols,
                            .shard_cols = ce.shard_cols});
  tp.all_reduce_sum(ce.lse);
  ops::vocab_shard_target_logit({.target_logit = ce.losses,
                                 .logits = ce.logits,
                                 .targets = ce.targets,
                                 .rows = ce.rows,
                                 .vocab_start = ce.vocab_start,
                                 .real_cols = ce.real_cols,
                                 .shard_cols = ce.shard_cols});
  tp.all_reduce_sum(ce.losses);
  ops::vocab_shard_finish({.losses = ce.losses,
                           .lse = ce.lse,
                           .row_max = ce.row_max,
                           .targets = ce.targets,
                           .rows = ce.rows});
}

}  // namespace parallel
