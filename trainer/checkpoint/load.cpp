// Reading checkpoints: find the step to resume from, map its rank files (mmap, read-only; pages
// come from the page cache, nothing is loaded twice, and pages hashed or read are dropped from the
// process's resident set), verify sizes and XXH64 checksums, and gather any requested slice of a
// tensor from whichever written shards overlap it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "runtime/error.h"
#include "trainer/checkpoint/format.h"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using checkpoint::ManifestShard;

// One rank file, mapped read-only for the reader's lifetime.
class MappedFile {
 public:
  MappedFile(const std::string& path, int64_t expected_bytes, uint64_t expected_xxh64)
      : path_(path), bytes_(expected_bytes), expected_xxh64_(expected_xxh64) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw runtime::InputError(path + ": cannot open: " + std::strerror(errno));
    struct stat status {};
    if (::fstat(fd, &status) != 0) {
      const int error = errno;
      ::close(fd);
      throw runtime::InputError(path + ": cannot stat: " + std::strerror(error));
    }
    if (status.st_size != expected_bytes) {
      ::close(fd);
      throw runtime::InputError(TRAINER_STR(path << ": size mismatch: the manifest records "
                                                 << expected_bytes << " bytes, the file has "
                                                 << status.st_size));
    }
    if (bytes_ > 0) {
      void* address = ::mmap(nullptr, static_cast<size_t>(bytes_), PROT_READ, MAP_SHARED, fd, 0);
      const int error = errno;
      ::close(fd);  // the mapping keeps the file open
      if (address == MAP_FAILED)
        throw runtime::InputError(path + ": cannot mmap: " + std::strerror(error));
      data_ = static_cast<const unsigned char*>(address);
    } else {
      ::close(fd);
    }
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), static_cast<size_t>(bytes_));
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Hashes the file a piece at a time, dropping each piece from this process's resident pages
  // once hashed (the page cache keeps them for the reads): verifying a file of optimizer moments
  // and weights does not make its whole size resident.
  void verify() {
    if (verified_) return;
    checkpoint::Xxh64 hash;
    constexpr size_t kPiece = size_t{64} << 20;  // a multiple of the page size
    for (size_t begin = 0; begin < static_cast<size_t>(bytes_); begin += kPiece) {
      unsigned char* piece = const_cast<unsigned char*>(data_) + begin;
      const size_t size = std::min(kPiece, static_cast<size_t>(bytes_) - begin);
      ::madvise(piece, size, MADV_SEQUENTIAL);
      hash.update(piece, size);
      ::madvise(piece, size, MADV_DONTNEED);  // a read-only shared mapping: refaults on use
    }
    const uint64_t actual = hash.digest();
    if (actual != expected_xxh64_)
      throw runtime::InputError(path_ + ": checksum mismatch: the manifest records xxh64 " +
                                checkpoint::hex64(expected_xxh64_) + ", the file hashes to " +
                                checkpoint::hex64(actual));
    verified_ = true;
  }

  const unsigned char* data() const { return data_; }

  // Drops the pages of bytes [offset, offset + size) from this process's resident pages (the
  // page cache keeps them; a later read refaults them).
  void drop(int64_t offset, int64_t size) const {
    if (data_ == nullptr || size <= 0) return;
    const auto page = static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
    const int64_t begin = offset / page * page;
    const int64_t end = std::min(bytes_, (offset + size + page - 1) / page * page);
    ::madvise(const_cast<unsigned char*>(data_) + begin, static_cast<size_t>(end - begin),
              MADV_DONTNEED);
  }

 private:
  std::string path_;
  int64_t bytes_;
  uint64_t expected_xxh64_;
  const unsigned char* data_ = nullptr;
  bool verified_ = false;
};

// A box [lo, hi) per dimension of a global tensor.
struct Box {
  std::vector<int64_t> lo, hi;
  bool empty() const {
    for (size_t d = 0; d < lo.size(); ++d)
      if (lo[d] >= hi[d]) return true;
    return false;
  }
};

Box box_of(const std::vector<int64_t>& global_shape, const ShardSlice& slice) {
  Box box{std::vector<int64_t>(global_shape.size(), 0), global_shape};
  if (slice.dim >= 0) {
    box.lo[static_cast<size_t>(slice.dim)] = slice.offset;
    box.hi[static_cast<size_t>(slice.dim)] = slice.offset + slice.length;
  }
  return box;
}

Box intersect(const Box& a, const Box& b) {
  Box box = a;
  for (size_t d = 0; d < a.lo.size(); ++d) {
    box.lo[d] = std::max(a.lo[d], b.lo[d]);
    box.hi[d] = std::min(a.hi[d], b.hi[d]);
  }
  return box;
}

std::string box_text(const Box& box) {
  std::string text = "[";
  for (size_t d = 0; d < box.lo.size(); ++d)
    text += (d > 0 ? ", " : "") + std::to_string(box.lo[d]) + ":" + std::to_string(box.hi[d]);
  return text + "]";
}

// Which parts of a requested box the shards cover, on the grid of all their boundaries (a few
// cells per shard: shards are slices along one dimension).
class CoverageGrid {
 public:
  CoverageGrid(const Box& request, const std::vector<Box>& pieces) {
    breaks_.resize(request.lo.size());
    for (size_t d = 0; d < request.lo.size(); ++d) {
      std::vector<int64_t>& cuts = breaks_[d];
      cuts = {request.lo[d], request.hi[d]};
      for (const Box& piece : pieces) {
        cuts.push_back(piece.lo[d]);
        cuts.push_back(piece.hi[d]);
      }
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    }
    size_t cells = 1;
    for (const std::vector<int64_t>& cuts : breaks_) cells *= cuts.size() - 1;
    covered_.assign(cells, 0);
  }

  // Marks `piece` covered; false when every cell of it was covered already.
  bool add(const Box& piece) {
    bool added = false;
    for_each_cell(piece, [&](size_t cell) {
      added = added || covered_[cell] == 0;
      covered_[cell] = 1;
    });
    return added;
  }

  // The first box of the grid that no piece covers, if any.
  std::optional<Box> first_gap() const {
    const size_t dims = breaks_.size();
    for (size_t cell = 0; cell < covered_.size(); ++cell) {
      if (covered_[cell] == 0) {
        Box gap{std::vector<int64_t>(dims), std::vector<int64_t>(dims)};
        size_t rest = cell;
        for (size_t d = dims; d-- > 0;) {
          const size_t cells_d = breaks_[d].size() - 1;
          gap.lo[d] = breaks_[d][rest % cells_d];
          gap.hi[d] = breaks_[d][rest % cells_d + 1];
          rest /= cells_d;
        }
        return gap;
      }
    }
    return std::nullopt;
  }

 private:
  template <typename Visit>
  void for_each_cell(const Box& piece, const Visit& visit) const {
    const size_t dims = breaks_.size();
    std::vector<size_t> first(dims), last(dims), index(dims);
    for (size_t d = 0; d < dims; ++d) {
      const std::vector<int64_t>& cuts = breaks_[d];
      first[d] = static_cast<size_t>(std::lower_bound(cuts.begin(), cuts.end(), piece.lo[d]) -
                                     cuts.begin());
      last[d] = static_cast<size_t>(std::lower_bound(cuts.begin(), cuts.end(), piece.hi[d]) -
                                    cuts.begin());
      if (first[d] >= last[d]) return;
      index[d] = first[d];
    }
    while (true) {
      size_t cell = 0;
      for (size_t d = 0; d < dims; ++d) cell = cell * (breaks_[d].size() - 1) + index[d];
      visit(cell);
      size_t d = dims;
      while (d > 0 && ++index[d - 1] == last[d - 1]) {
        index[d - 1] = first[d - 1];
        --d;
      }
      if (d == 0) return;
    }
  }

  std::vector<std::vector<int64_t>> breaks_;  // per dim: sorted distinct boundaries
  std::vector<uint8_t> covered_;              // row-major over the grid's cells
};

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Copies `piece` (global coordinates) from a buffer holding box `source` to one holding box
// `target`, both row-major. Trailing dimensions that `piece` spans whole merge into one run.
void copy_box(const Box& piece, const std::vector<int64_t>& global_shape, int64_t item_bytes,
              const Box& source, const unsigned char* source_data, const Box& target,
              unsigned char* target_data) {
  const size_t dims = global_shape.size();
  if (dims == 0) {
    std::memcpy(target_data, source_data, static_cast<size_t>(item_bytes));
    return;
  }
  std::vector<int64_t> source_shape(dims), target_shape(dims);
  for (size_t d = 0; d < dims; ++d) {
    source_shape[d] = source.hi[d] - source.lo[d];
    target_shape[d] = target.hi[d] - target.lo[d];
  }
  const std::vector<int64_t> source_strides = row_major_strides(source_shape);
  const std::vector<int64_t> target_strides = row_major_strides(target_shape);
  size_t run_dim = dims - 1;  // the outermost dimension of one contiguous run
  while (run_dim > 0 && piece.lo[run_dim] == 0 && piece.hi[run_dim] == global_shape[run_dim])
    --run_dim;
  const int64_t run_bytes = (piece.hi[run_dim] - piece.lo[run_dim]) * source_strides[run_dim] *
                            item_bytes;  // source and target agree here
  std::vector<int64_t> index(piece.lo.begin(),
                             piece.lo.begin() + static_cast<int64_t>(run_dim) + 1);
  while (true) {
    int64_t source_offset = 0, target_offset = 0;
    for (size_t d = 0; d <= run_dim; ++d) {
      source_offset += (index[d] - source.lo[d]) * source_strides[d];
      target_offset += (index[d] - target.lo[d]) * target_strides[d];
    }
    std::memcpy(target_data + target_offset * item_bytes, source_data + source_offset * item_bytes,
                static_cast<size_t>(run_bytes));
    size_t d = run_dim;  // advance the odometer over the dimensions outside the run
    while (d > 0 && ++index[d - 1] == piece.hi[d - 1]) {
      index[d - 1] = piece.lo[d - 1];
      --d;
    }
    if (d == 0) return;
  }
}

}  // namespace

struct CheckpointReader::State {
  std::string step_dir;
  checkpoint::Manifest manifest;
  std::map<std::string, size_t> file_index;                   // file name -> files
  std::vector<std::unique_ptr<MappedFile>> files;             // as manifest.files
  std::map<std::string, std::vector<size_t>> shards_by_name;  // -> manifest.shards
};

CheckpointReader::CheckpointReader(const std::string& step_dir, ChecksumPolicy policy)
    : state_(std::make_unique<State>()) {
  state_->step_dir = step_dir;
  state_->manifest = checkpoint::read_manifest(step_dir);
  for (const checkpoint::ManifestFile& file : state_->manifest.files) {
    state_->file_index[file.name] = state_->files.size();
    state_->files.push_back(
        std::make_unique<MappedFile>(step_dir + "/" + file.name, file.bytes, file.xxh64));
  }
  if (policy == ChecksumPolicy::verify_all)
    for (const std::unique_ptr<MappedFile>& file : state_->files) file->verify();
  for (size_t i = 0; i < state_->manifest.shards.size(); ++i)
    state_->shards_by_name[state_->manifest.shards[i].name].push_back(i);
}

CheckpointReader::~CheckpointReader() = default;
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;

const CheckpointMeta& CheckpointReader::meta() const {
  return state_->manifest.meta;
}

bool CheckpointReader::has(const std::string& name) const {
  return state_->shards_by_name.count(name) > 0;
}

std::vector<int64_t> CheckpointReader::global_shape(const std::string& name) const {
  const auto found = state_->shards_by_name.find(name);
  if (found == state_->shards_by_name.end())
    throw runtime::InputError(state_->step_dir + ": tensor '" + name +
                              "' is not in the checkpoint");
  return state_->manifest.shards[found->second.front()].global_shape;
}

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> names;
  for (const auto& entry : state_->shards_by_name) names.push_back(entry.first);
  return names;  // std::map keeps them sorted
}

void CheckpointReader::read(const std::string& name, const std::vector<int64_t>& global_shape,
                            const ShardSlice& slice, runtime::DType dtype, void* out) const {
  const std::string where = state_->step_dir + ": tensor '" + name + "'";
  const auto found = state_->shards_by_name.find(name);
  if (found == state_->shards_by_name.end())
    throw runtime::InputError(where + " is not in the checkpoint");
  const std::vector<size_t>& shard_indices = found->second;
  const ManifestShard& first = state_->manifest.shards[shard_indices.front()];
  if (first.global_shape != global_shape)
    throw runtime::InputError(where + ": the checkpoint holds global shape " +
                              checkpoint::shape_text(first.global_shape) + ", the model expects " +
                              checkpoint::shape_text(global_shape));
  if (first.dtype != dtype)
    throw runtime::InputError(where + ": the checkpoint holds dtype " +
                              std::string(runtime::dtype_name(first.dtype)) +
                              ", the model expects " + std::string(runtime::dtype_name(dtype)));
  const std::string defect = checkpoint::slice_defect(global_shape, slice);
  TRAINER_ASSERT(defect.empty(), "reading tensor '" << name << "': " << defect);

  const Box request = box_of(global_shape, slice);
  if (request.empty()) return;
  std::vector<Box> pieces, sources;
  std::vector<const ManifestShard*> piece_shards;
  for (const size_t index : shard_indices) {
    const ManifestShard& shard = state_->manifest.shards[index];
    const Box source = box_of(shard.global_shape, shard.slice);
    const Box piece = intersect(request, source);
    if (piece.empty()) continue;
    pieces.push_back(piece);
    sources.push_back(source);
    piece_shards.push_back(&shard);
  }
  CoverageGrid coverage(request, pieces);
  std::vector<bool> needed(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) needed[i] = coverage.add(pieces[i]);  // skip replicas
  if (const std::optional<Box> gap = coverage.first_gap())
    throw runtime::InputError(where + ": the checkpoint's shards do not cover " + box_text(*gap) +
                              " of the requested " + checkpoint::slice_text(slice) + " of " +
                              checkpoint::shape_text(global_shape));

  const int64_t item_bytes = runtime::dtype_size(dtype);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!needed[i]) continue;
    MappedFile& file = *state_->files[state_->file_index.at(piece_shards[i]->file)];
    file.verify();  // once per file; a no-op after the constructor verified it
    copy_box(pieces[i], global_shape, item_bytes, sources[i], file.data() + piece_shards[i]->offset,
             request, static_cast<unsigned char*>(out));
    file.drop(piece_shards[i]->offset, piece_shards[i]->bytes);  // read once: not kept resident
  }
}

std::optional<std::string> find_checkpoint(const std::string& dir, const std::string& which) {
  std::error_code error;
  std::string step_dir;
  if (which == "auto") {
    const fs::path latest = fs::path(dir) / checkpoint::kLatestFileName;
    if (!fs::exists(latest, error)) {
      if (error && error != std::errc::no_such_file_or_directory &&
          error != std::errc::not_a_directory)
        throw runtime::InputError(latest.string() + ": cannot access: " + error.message());
      return std::nullopt;
    }
    std::ifstream in(latest);
    std::string name;
    if (!in || !std::getline(in, name))
      throw runtime::InputError(latest.string() + ": cannot read: " + std::strerror(errno));
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    if (checkpoint::parse_step_dir_name(name) < 0)
      throw runtime::InputError(latest.string() + ": \"" + name +
                                "\" does not name a step directory (step_<N>)");
    step_dir = (fs::path(dir) / name).string();
    if (!fs::is_directory(step_dir, error))
      throw runtime::InputError(latest.string() + ": names " + step_dir + ", which does not exist");
  } else {
    step_dir = which;
    if (!fs::is_directory(step_dir, error) && fs::is_directory(fs::path(dir) / which, error))
      step_dir = (fs::path(dir) / which).string();
    if (!fs::is_directory(step_dir, error))
      throw runtime::InputError(which + ": not a checkpoint step directory (looked also in " + dir +
                                ")");
  }
  const checkpoint::Manifest manifest = checkpoint::read_manifest(step_dir);
  const int64_t named_step =
      checkpoint::parse_step_dir_name(fs::path(step_dir).filename().string());
  if (named_step >= 0 && named_step != manifest.meta.step)
    throw runtime::InputError(TRAINER_STR(step_dir << "/" << checkpoint::kManifestFileName
                                                   << ": records step " << manifest.meta.step
                                                   << " but the directory is step " << named_step));
  return step_dir;
}

}  // namespace trainer
