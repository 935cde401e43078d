// The on-disk pieces of a checkpoint (Note [Checkpoint layout] in
// trainer/checkpoint/checkpoint.h): the manifest and its JSON, the XXH64 checksum, and the
// per-rank shard file writer. Internal to the checkpoint code and its tests; the trainer uses
// trainer/checkpoint/checkpoint.h only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"

namespace trainer::checkpoint {

constexpr int kManifestVersion = 1;
constexpr const char* kManifestFileName = "manifest.json";
constexpr const char* kLatestFileName = "latest";

std::string step_dir_name(int64_t step);  // "step_00000042"
std::string rank_file_name(int rank);     // "rank_00003.bin"
// The step of a directory name "step_<digits>" (no suffix), or -1.
int64_t parse_step_dir_name(std::string_view name);

// XXH64 (Yann Collet's xxHash, 64-bit variant), streaming; digest() may be called at any time.
class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void* bytes, size_t size);
  uint64_t digest() const;

 private:
  uint64_t accumulators_[4];
  uint64_t seed_;
  uint64_t total_bytes_ = 0;
  unsigned char buffer_[32];
  size_t buffered_bytes_ = 0;
};
uint64_t xxh64(const void* bytes, size_t size, uint64_t seed = 0);
std::string hex64(uint64_t value);  // 16 lowercase hex digits

struct ManifestFile {
  std::string name;  // "rank_00003.bin", relative to the step directory
  int rank = 0;      // the world rank that wrote it
  int64_t bytes = 0;
  uint64_t xxh64 = 0;  // of all its bytes
};

struct ManifestShard {
  std::string name;
  std::vector<int64_t> global_shape;
  ShardSlice slice;
  runtime::DType dtype = runtime::DType::f32;
  std::string file;    // a ManifestFile name
  int64_t offset = 0;  // byte range [offset, offset + bytes) in that file
  int64_t bytes = 0;
};

struct Manifest {
  CheckpointMeta meta;
  std::vector<ManifestFile> files;
  std::vector<ManifestShard> shards;
};

// Pretty JSON with "version": kManifestVersion; one line per file and per shard.
std::string manifest_to_json(const Manifest& manifest);
// Parses and validates `json_text` (every field present and typed, known version and dtypes,
// shards inside their files and global shapes, one global shape and dtype per name). Throws
// runtime::InputError "<path>: <defect>".
Manifest parse_manifest(const std::string& json_text, const std::string& path);
Manifest read_manifest(const std::string& step_dir);  // <step_dir>/manifest.json

// The local shape of `slice` of `global_shape`, and shard checks shared by writer and reader.
std::vector<int64_t> local_shape(const std::vector<int64_t>& global_shape, const ShardSlice& slice);
// Empty when the slice is valid for the shape, else what is wrong with it.
std::string slice_defect(const std::vector<int64_t>& global_shape, const ShardSlice& slice);
std::string shape_text(const std::vector<int64_t>& shape);  // "[8, 6]"
std::string slice_text(const ShardSlice& slice);            // "whole" or "dim 0 [4, 8)"

// Writes `shards` back to back into `path` (created or truncated; large writes; fsync; close)
// and returns the file entry and the shard entries (file = the base name of `path`). OS
// failures (ENOSPC included) throw runtime::LibraryError naming the path and errno text.
struct RankFileRecord {
  ManifestFile file;
  std::vector<ManifestShard> shards;
};
RankFileRecord write_rank_file(const std::string& path, int rank,
                               const std::vector<TensorShard>& shards);

// Tests only: called by save_checkpoint at each named stage ("prepared", "rank_file_written",
// "manifest_written", "renamed", "latest_written") with the calling rank; a hook that throws
// makes that rank fail there, as a failing OS call would. Empty (the default) does nothing.
using FaultHook = std::function<void(std::string_view stage, int rank)>;
void set_fault_hook_for_testing(FaultHook hook);

}  // namespace trainer::checkpoint
