// `trainer calibrate`: times, on this process's device and at one rank's shapes of a run, the
// pieces the planner prices: a layer's forward and backward, each selective entry's rebuild
// (the recompute table's real forward pieces, model/recompute_modules.h), the embedding with
// the head and loss, and the optimizer step; plus the device's GEMM rate and copy bandwidth.
// Each piece: warm-up runs, then the median of repeats, the rounds (every piece once each)
// repeated until they span min_seconds (Note [Calibration window] in calibrate.cpp). The pieces
// run at the rank's exact shapes (its heads, ffn and vocabulary shard, its sequence-parallel rows
// and context-ring blocks). Alone, the rank's collectives are the meta replay's (no peers, no
// transfer: parallel/core/replay_communicator.h) and the comm model adds the communication.
// Under mpirun (`mpirun -np N trainer calibrate`) the N ranks form N / (tp x cp) replicas of one
// tensor x context group and calibrate side by side: the collectives run over real peers and are
// part of the pieces' times (TimeProfile::collectives_measured), and the ranks share the cores,
// memory and links as a run's ranks do. Rank 0's measurements make the profile.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "parallel/core/process_groups.h"
#include "runtime/allocator.h"
#include "trainer/config/config.h"
#include "trainer/planning/time_profile.h"

namespace trainer {

struct MeasuredRates {
  double gemm_gflops = 0;
  double copy_gbps = 0;
};

// The best of a few square GEMMs (the linear op the model runs; 1024 on the host, 4096 on a
// device) and 64 MiB copies on `allocator`'s device, in `dtype`.
MeasuredRates measure_rates(runtime::Allocator& allocator, runtime::DType dtype);
// The same on the host in f32, measured once per process.
MeasuredRates measure_host_rates();

// What a profile's `device` says of `allocator`'s device for `config` ("cpu: <model>, N
// threads", or "cuda: <name>" where the device has a name).
std::string calibration_device(const Config& config, const runtime::Allocator& allocator);

struct CalibrationOptions {
  int warmup = 2;
  int repeats = 5;           // at least this many kept rounds
  double min_seconds = 2.0;  // and more until the kept rounds span this long (at most 1000)
  // With data.reset_attention_mask, the documents the attention is timed with (Note [Timed
  // documents] in calibrate.cpp): per microbatch, the (seq_length, micro_batch) starts of the
  // whole sequence (leading_document_starts), one microbatch a round in turn. Empty without it.
  std::vector<std::vector<int32_t>> document_starts = {};
};

// The documents a calibration of `config` times (leading_document_starts of its training data,
// up to 8 microbatches of its first global batch) under data.reset_attention_mask; none without
// it. Opens the datasets.
std::vector<std::vector<int32_t>> calibration_documents(const Config& config);

// The groups of `mpirun -np world_size trainer calibrate` for `config` (collective over
// MPI_COMM_WORLD): tensor x context groups as the run's, world_size / (tp x cp) of them as
// replicas, one pipeline stage. InputError naming the sizes when world_size is not a multiple
// of tp x cp.
parallel::ProcessGroups calibration_groups(const Config& config, int64_t world_size);

// The profile of the first rank of pipeline stage 0 of `config` (every stage's layers have its
// shapes), measured on `allocator`'s device (the host, or the CUDA device this process set up).
// `peers`: calibration_groups' groups, on every rank of them; null: alone, over the replay.
// options.document_starts must hold documents exactly when config masks them (InputError).
TimeProfile calibrate(const Config& config, runtime::Allocator& allocator,
                      const CalibrationOptions& options = {},
                      parallel::ProcessGroups* peers = nullptr);

// The mean length in tokens of the documents options.document_starts holds, over microbatches
// of `micro_batch` rows; 0 without documents.
double mean_document_length(const CalibrationOptions& options, int64_t micro_batch);

}  // namespace trainer
