// Resume checkpoints: every rank writes its named tensor shards to one file of a step directory,
// rank 0 publishes a manifest and then `latest`; any layout reads any other (see Note [Checkpoint
// layout]). Collectives go over a host-buffer communicator (MPI or Self, never NCCL).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "parallel/core/communicator.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace trainer {

// Note [Checkpoint layout]
// <checkpoint.dir>/step_<NNNNNNNN>/rank_<RRRRR>.bin  raw concatenation of that rank's shards
// <checkpoint.dir>/step_<NNNNNNNN>/manifest.json     meta; per file bytes + xxh64; per shard
//                                                    name, global shape, slice, dtype, byte range
// <checkpoint.dir>/latest                            "step_<NNNNNNNN>\n", replaced last
// A step is written as step_N.tmp and renamed into place once complete, so a crash at any point
// leaves `latest` naming a complete checkpoint. A shard is a slice of a named global tensor along
// at most one dimension; a reader gathers any requested slice from whichever shards overlap it.

// A range [offset, offset + length) along dimension `dim` of the global tensor; dim -1 is the
// whole tensor (offset and length unused).
struct ShardSlice {
  int dim = -1;
  int64_t offset = 0;
  int64_t length = 0;
};

struct TensorShard {
  std::string name;  // e.g. "param/layers.3.mlp.linear_fc1.weight", "exp_avg/...", "exp_avg_sq/..."
  std::vector<int64_t> global_shape;
  ShardSlice slice;
  runtime::DType dtype = runtime::DType::f32;
  const void* data = nullptr;  // the local shard, contiguous, row-major in the local shape
};

struct CheckpointMeta {
  int64_t step = 0;              // completed optimizer steps
  int64_t consumed_samples = 0;  // data position
  uint64_t seed = 0;
  std::string config_yaml;                     // the run's effective config (trainer::to_yaml)
  int64_t tensor = 1, pipeline = 1, data = 1, context = 1;  // the layout that wrote it
  std::map<std::string, std::string> extra;    // free-form (e.g. RNG counters)
};

// Collective over `world`: every rank calls it with the same `dir`, `meta` and `keep_last`. A
// rank with `writes_shards == false` (a data-parallel replica, dp rank > 0) passes no shards.
// Each writing rank writes <dir>/step_N.tmp/rank_R.bin (R = world rank) and fsyncs it; rank 0
// then writes and fsyncs manifest.json, renames step_N.tmp -> step_N (atomically exchanging an
// existing step_N), fsyncs <dir>, replaces <dir>/latest atomically, and deletes older steps so
// that `keep_last` remain, step_N included (keep_last <= 0 keeps every step). Stale step_*.tmp
// directories of crashed saves are removed first. On failure every rank throws (the failing
// rank its own runtime::InputError/LibraryError naming the path and errno text, the others a
// LibraryError naming the failed ranks); step_N.tmp is removed and `latest` is unchanged.
void save_checkpoint(const std::string& dir, const CheckpointMeta& meta,
                     const std::vector<TensorShard>& shards, bool writes_shards, int keep_last,
                     parallel::Communicator& world);

// checkpoint.async: the same protocol with this rank's file written on a
// background thread from a snapshot the save owns, while training goes on.
// The constructor prepares the step directory (collective); poll() (collective,
// once per training step) publishes the checkpoint once every rank's file is
// written; wait() (collective) blocks until then. One save in flight at a time.
class AsyncCheckpointSave {
 public:
  // `shards` point into `snapshot`, which the save keeps alive.
  AsyncCheckpointSave(const std::string& dir, const CheckpointMeta& meta,
                      runtime::Tensor snapshot, std::vector<TensorShard> shards,
                      bool writes_shards, int keep_last, parallel::Communicator& world);
  ~AsyncCheckpointSave();
  AsyncCheckpointSave(const AsyncCheckpointSave&) = delete;
  AsyncCheckpointSave& operator=(const AsyncCheckpointSave&) = delete;

  bool poll(parallel::Communicator& world);  // true once published
  void wait(parallel::Communicator& world);
  int64_t step() const;

 private:
  void finish(parallel::Communicator& world);
  struct State;
  std::unique_ptr<State> state_;
};

// The step directory to resume from. `which` is "auto" (the step named by <dir>/latest; nullopt
// when <dir>/latest does not exist yet) or a step directory path (taken relative to the working
// directory, or else to `dir`). The manifest is read and validated (checksums are not): a
// missing or malformed manifest, missing fields or an unknown version throw runtime::InputError
// naming the file.
std::optional<std::string> find_checkpoint(const std::string& dir, const std::string& which);

// When CheckpointReader verifies file checksums: all files in its constructor, or each file the
// first time read() touches it (then a rank that loads only its own shards reads only the files
// that hold them, once for the checksum and once for the data).
enum class ChecksumPolicy { verify_all, verify_on_first_read };

// Reads one step directory. Not thread-safe (verify_on_first_read updates state in read()).
class CheckpointReader {
 public:
  // Parses the manifest and checks every file's size and (by policy) xxh64 checksum; throws
  // runtime::InputError naming the file and the expected and actual values.
  explicit CheckpointReader(const std::string& step_dir,
                            ChecksumPolicy policy = ChecksumPolicy::verify_all);
  ~CheckpointReader();
  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;

  const CheckpointMeta& meta() const;
  bool has(const std::string& name) const;
  std::vector<int64_t> global_shape(const std::string& name) const;  // InputError if missing
  std::vector<std::string> names() const;                            // sorted

  // Fills `out` (contiguous, row-major in the local shape of `slice`) with that slice of `name`,
  // gathered from every overlapping shard however the writer sliced it. Throws
  // runtime::InputError naming the tensor when it is missing, its global shape or dtype differ,
  // or the written shards do not cover the requested region.
  void read(const std::string& name, const std::vector<int64_t>& global_shape,
            const ShardSlice& slice, runtime::DType dtype, void* out) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace trainer
