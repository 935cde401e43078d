// The predicted step time of a config (docs/planning.md): each pipeline stage's forward and
// backward ops priced by the cost model (cost_model.h) plus the comm model below, run through
// the schedule's own op lists (parallel/pipeline/schedules.h) with the dependencies between
// stages, so that the bubble is the schedule's; then the gradient reduction and the optimizer.
//
// The comm model: ring collectives (all-reduce moves 2(n-1)/n of the payload, all-gather and
// reduce-scatter (n-1)/n) and point-to-point sends at a group's link bandwidth plus a latency.
// A group is intra-node when it spans at most ranks_per_node consecutive ranks (tensor fastest,
// then context, data, pipeline). Tensor- and context-parallel traffic is not overlapped with
// compute, and comes from the profile's layer times instead when it was calibrated over real
// peers (TimeProfile::collectives_measured); the data-parallel reduction hides behind backward
// compute when overlapped (optimizer.overlap_grad_reduce) on CUDA and is exposed for what
// backward leaves; on the CPU it is exposed whole (reduction_hides_behind_backward). Not
// modelled: NCCL's algorithm choice (tree, NVLS), link contention between groups, kernel launch
// gaps, and the pipeline's blocking send/receive pairing beyond the data dependencies.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/planning/cost_model.h"

namespace trainer {

struct LinkBandwidths {
  double intra_gbps = 0;  // GB/s per rank, within a node
  double inter_gbps = 0;  // across nodes
  int64_t ranks_per_node = 8;
  double latency_s = 0;  // per message
  // The bus bandwidth of a sum (all-reduce, reduce-scatter) within a node, where it was measured
  // or given: MPI on the CPU adds on the computing cores and moves less than a send does (2
  // ranks on a 2-core VM: 1.5-2.2 GB/s against 4.7-7.1 GB/s of ping-pong at 64 MiB). 0: the
  // link's.
  double reduce_gbps = 0;
  std::string source;
};

// Stated links for `config`'s device: NVLink 4 and 400 Gb/s InfiniBand on cuda, MPI over shared
// memory on the CPU.
LinkBandwidths default_links(const Config& config);
// "intra=GBPS,inter=GBPS,reduce=GBPS,ranks-per-node=N,latency-us=US" over `links` (any subset);
// InputError naming the flag.
LinkBandwidths parse_links(const std::string& text, LinkBandwidths links);
// How sums within a node are priced, for the links' source line: "at 2.1 GB/s" or "at the
// link's".
std::string reduce_words(const LinkBandwidths& links);

// The communication one rank spends per microbatch and per step, seconds.
struct CommTimes {
  double layer_forward_s = 0;   // tensor- and context-parallel traffic of one layer's forward
  double layer_backward_s = 0;  // and of its backward
  double rebuild_gather_s = 0;  // one sequence-parallel all-gather of a rebuild's GEMM input
  double p2p_s = 0;             // one pipeline send of a microbatch's hidden states
  double grad_reduce_s = 0;     // the step's data-parallel gradient reduction (and gather)
  double embedding_sync_s = 0;  // the tied embeddings' all-reduce between first and last stage
};
// Whether the data-parallel reduction can hide behind backward compute: overlapped
// (optimizer.overlap_grad_reduce) on CUDA, where NCCL moves and sums on its own. On the CPU,
// MPI's copies and sums run on the computing cores inside the progress calls between backward
// ops, so the whole reduction adds to the step (dp2 here: about 3 ms of grad_reduce_in_backward
// + grad_reduce_wait per step either way).
bool reduction_hides_behind_backward(const Config& config);

// The tensor- and context-parallel terms are 0 when `times` already include them
// (RankTimes::collectives_included).
CommTimes comm_times(const Config& config, const StageSetup& setup, const LinkBandwidths& links,
                     const RankTimes& times);

struct StagePrediction {
  double busy_s = 0;       // forward and backward ops, one after another
  double recompute_s = 0;  // of which rebuilding
  double finish_s = 0;     // when its last op ends in the schedule
  double reduce_s = 0;     // exposed gradient reduction and embedding sync
  double optimizer_s = 0;
  double total_s() const { return finish_s + reduce_s + optimizer_s; }
};

struct StepPrediction {
  std::vector<StagePrediction> stages;
  double step_s = 0;
  double bubble_s = 0;     // of the slowest stage: waiting inside the schedule
  double recompute_s = 0;  // of the slowest stage
  double tokens_per_s = 0;
  double mfu_percent = 0;  // model FLOPs over every rank's peak (CostModel::peak_gflops)
  std::string source;      // where the times came from (CostModel::source)
  std::string links;       // the comm model's bandwidths, when the job communicates
};

StepPrediction predict_step_time(const Config& config, const CostModel& costs,
                                 const LinkBandwidths& links);

// Seconds of `config`'s rank-0 stage's layer forward communication and rebuild gathers: what the
// planner adds to recompute prices (full layers rerun their forward's traffic).
RecomputePrices stage_time_prices(const Config& config, const StageSetup& setup,
                                  const CostModel& costs, const LinkBandwidths& links);

}  // namespace trainer
