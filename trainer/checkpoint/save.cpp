// Writing checkpoints: the per-rank shard file (large buffered writes, hashed on the way out) and
// the collective save protocol of save_checkpoint, whose phases end in an all-reduce of failure
// flags so every rank throws together and no rank waits in a collective that never comes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <thread>
#include <atomic>

#include "runtime/error.h"
#include "trainer/checkpoint/format.h"
#include "trainer/export/safetensors.h"

namespace trainer {
namespace checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr size_t kWriteBufferBytes = size_t{8} << 20;   // small shards are gathered up to this
constexpr size_t kMaxWriteCallBytes = size_t{1} << 30;  // below Linux's 0x7ffff000 per write()

FaultHook& fault_hook() {
  static FaultHook hook;
  return hook;
}

void fault_point(std::string_view stage, int rank) {
  if (fault_hook()) fault_hook()(stage, rank);
}

std::string errno_text(int error) {
  return std::strerror(error);
}

// Appends bytes to a new file through one large buffer; hashes everything it writes.
class FileSink {
 public:
  explicit FileSink(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw runtime::LibraryError(path + ": cannot create: " + errno_text(errno));
  }
  ~FileSink() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  // Reserves the file's blocks so a full disk fails here, before gigabytes are written. File
  // systems and devices without fallocate are fine; only a lack of space is an error.
  void reserve(int64_t bytes) {
    if (bytes <= 0) return;
    // fallocate(2), not posix_fallocate(3): glibc emulates the latter by writing every block.
    if (::fallocate(fd_, 0, 0, bytes) == 0) return;
    const int error = errno;
    if (error == ENOSPC || error == EFBIG || error == EDQUOT)
      throw runtime::LibraryError(path_ + ": cannot reserve " + std::to_string(bytes) +
                                  " bytes: " + errno_text(error));
  }

  void append(const void* bytes, size_t size) {
    hash_.update(bytes, size);
    bytes_ += static_cast<int64_t>(size);
    if (size >= kWriteBufferBytes / 2) {  // large shards go straight from the caller's memory
      flush();
      write_all(bytes, size);
      return;
    }
    if (buffer_.size() + size > kWriteBufferBytes) flush();
    const auto* first = static_cast<const char*>(bytes);
    buffer_.insert(buffer_.end(), first, first + size);
  }

  // Flushes, fsyncs and closes; returns the file's size and XXH64.
  std::pair<int64_t, uint64_t> finish() {
    flush();
    if (::fsync(fd_) != 0)
      throw runtime::LibraryError(path_ + ": fsync failed: " + errno_text(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0)
      throw runtime::LibraryError(path_ + ": close failed: " + errno_text(errno));
    return {bytes_, hash_.digest()};
  }

 private:
  void flush() {
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

  void write_all(const void* bytes, size_t size) {
    const char* next = static_cast<const char*>(bytes);
    while (size > 0) {
      const ssize_t written = ::write(fd_, next, std::min(size, kMaxWriteCallBytes));
      if (written < 0 && errno == EINTR) continue;
      if (written < 0) throw runtime::LibraryError(path_ + ": write failed: " + errno_text(errno));
      if (written == 0) throw runtime::LibraryError(path_ + ": write wrote nothing");
      next += written;
      size -= static_cast<size_t>(written);
    }
  }

  std::string path_;
  int fd_ = -1;
  std::vector<char> buffer_;
  Xxh64 hash_;
  int64_t bytes_ = 0;
};

void fsync_directory(const std::string& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw runtime::LibraryError(directory + ": cannot open to fsync: " + errno_text(errno));
  const bool synced = ::fsync(fd) == 0 || errno == EINVAL;  // some file systems cannot
  const int error = errno;
  ::close(fd);
  if (!synced) throw runtime::LibraryError(directory + ": fsync failed: " + errno_text(error));
}

void remove_tree(const fs::path& path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (error) throw runtime::LibraryError(path.string() + ": cannot remove: " + error.message());
}

std::vector<fs::path> list_directory(const fs::path& directory) {
  std::vector<fs::path> entries;
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error))
    entries.push_back(it->path());
  if (error) throw runtime::LibraryError(directory.string() + ": cannot list: " + error.message());
  return entries;
}

// ---- the records rank 0 gathers: a length-prefixed binary encoding of RankFileRecord ----------

class RecordEncoder {
 public:
  void integer(int64_t value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void text(const std::string& value) {
    integer(static_cast<int64_t>(value.size()));
    bytes_ += value;
  }
  std::string take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class RecordDecoder {
 public:
  explicit RecordDecoder(const std::string& bytes) : bytes_(bytes) {}
  int64_t integer() {
    TRAINER_ASSERT(position_ + sizeof(int64_t) <= bytes_.size(), "truncated rank record");
    int64_t value;
    std::memcpy(&value, bytes_.data() + position_, sizeof value);
    position_ += sizeof value;
    return value;
  }
  std::string text() {
    const auto size = static_cast<size_t>(integer());
    TRAINER_ASSERT(position_ + size <= bytes_.size(), "truncated rank record");
    std::string value = bytes_.substr(position_, size);
    position_ += size;
    return value;
  }

 private:
  const std::string& bytes_;
  size_t position_ = 0;
};

std::string encode_record(const RankFileRecord& record) {
  RecordEncoder out;
  out.text(record.file.name);
  out.integer(record.file.rank);
  out.integer(record.file.bytes);
  out.integer(static_cast<int64_t>(record.file.xxh64));
  out.integer(static_cast<int64_t>(record.shards.size()));
  for (const ManifestShard& shard : record.shards) {
    out.text(shard.name);
    out.integer(static_cast<int64_t>(shard.global_shape.size()));
    for (const int64_t extent : shard.global_shape) out.integer(extent);
    out.integer(shard.slice.dim);
    out.integer(shard.slice.offset);
    out.integer(shard.slice.length);
    out.integer(static_cast<int64_t>(shard.dtype));
    out.text(shard.file);
    out.integer(shard.offset);
    out.integer(shard.bytes);
  }
  return out.take();
}

RankFileRecord decode_record(const std::string& bytes) {
  RecordDecoder in(bytes);
  RankFileRecord record;
  record.file.name = in.text();
  record.file.rank = static_cast<int>(in.integer());
  record.file.bytes = in.integer();
  record.file.xxh64 = static_cast<uint64_t>(in.integer());
  record.shards.resize(static_cast<size_t>(in.integer()));
  for (ManifestShard& shard : record.shards) {
    shard.name = in.text();
    shard.global_shape.resize(static_cast<size_t>(in.integer()));
    for (int64_t& extent : shard.global_shape) extent = in.integer();
    shard.slice.dim = static_cast<int>(in.integer());
    shard.slice.offset = in.integer();
    shard.slice.length = in.integer();
    shard.dtype = static_cast<runtime::DType>(in.integer());
    shard.file = in.text();
    shard.offset = in.integer();
    shard.bytes = in.integer();
  }
  return record;
}

// Every rank's record reaches rank 0 (one length and one payload broadcast per rank: the
// Communicator has no gather). Other ranks return an empty list.
std::vector<RankFileRecord> gather_records(parallel::Communicator& world,
                                           const std::optional<RankFileRecord>& mine) {
  std::vector<RankFileRecord> records;
  for (int root = 0; root < world.size(); ++root) {
    std::string payload = root == world.rank() && mine ? encode_record(*mine) : std::string();
    int64_t length = static_cast<int64_t>(payload.size());
    world.broadcast(&length, sizeof length, root);
    if (length == 0) continue;
    payload.resize(static_cast<size_t>(length));
    world.broadcast(payload.data(), length, root);
    if (world.rank() == 0) records.push_back(decode_record(payload));
  }
  return records;
}

// The ranks whose flag is set; every rank gets the same list.
std::vector<int> agree_on_failures(parallel::Communicator& world, bool failed) {
  std::vector<double> flags(static_cast<size_t>(world.size()), 0.0);
  flags[static_cast<size_t>(world.rank())] = failed ? 1.0 : 0.0;
  world.all_reduce_sum(flags.data(), static_cast<int64_t>(flags.size()));
  std::vector<int> failed_ranks;
  for (size_t rank = 0; rank < flags.size(); ++rank)
    if (flags[rank] != 0.0) failed_ranks.push_back(static_cast<int>(rank));
  return failed_ranks;
}

// A leftover of a crashed save: "step_<digits>.tmp" or "step_<digits>.old.tmp".
bool is_stale_temporary(const std::string& name) {
  for (const std::string_view suffix : {std::string_view(".old.tmp"), std::string_view(".tmp")})
    if (name.size() > suffix.size() && name.ends_with(suffix) &&
        parse_step_dir_name(std::string_view(name).substr(0, name.size() - suffix.size())) >= 0)
      return true;
  return false;
}

// Moves `staged` onto `final_dir`. An existing `final_dir` (a step saved again, or one a crash
// left unpublished) is swapped out atomically and returned for deletion, so `final_dir` is a
// complete checkpoint at every instant; without RENAME_EXCHANGE it is moved aside first.
std::optional<fs::path> publish_directory(const fs::path& staged, const fs::path& final_dir) {
  std::error_code error;
  if (!fs::exists(final_dir, error)) {
    if (::rename(staged.c_str(), final_dir.c_str()) != 0)
      throw runtime::LibraryError("rename " + staged.string() + " -> " + final_dir.string() +
                                  " failed: " + errno_text(errno));
    return std::nullopt;
  }
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0)
    return staged;  // now holds the replaced checkpoint
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    throw runtime::LibraryError("exchange " + staged.string() + " <-> " + final_dir.string() +
                                " failed: " + errno_text(errno));
  const fs::path aside = final_dir.string() + ".old.tmp";
  remove_tree(aside);
  if (::rename(final_dir.c_str(), aside.c_str()) != 0)
    throw runtime::LibraryError("rename " + final_dir.string() + " -> " + aside.string() +
                                " failed: " + errno_text(errno));
  if (::rename(staged.c_str(), final_dir.c_str()) != 0) {
    const int rename_error = errno;
    ::rename(aside.c_str(), final_dir.c_str());  // put the old step back
    throw runtime::LibraryError("rename " + staged.string() + " -> " + final_dir.string() +
                                " failed: " + errno_text(rename_error));
  }
  return aside;
}

// Deletes step directories numbered below `step`, all but the newest keep_last - 1 of them.
void prune_steps(const fs::path& root, int64_t step, int keep_last) {
  if (keep_last <= 0) return;
  std::vector<std::pair<int64_t, fs::path>> older;
  for (const fs::path& entry : list_directory(root)) {
    const int64_t entry_step = parse_step_dir_name(entry.filename().string());
    std::error_code error;
    if (entry_step >= 0 && entry_step < step && fs::is_directory(entry, error))
      older.emplace_back(entry_step, entry);
  }
  std::sort(older.begin(), older.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = static_cast<size_t>(keep_last - 1); i < older.size(); ++i)
    remove_tree(older[i].second);
}

// Rank 0, before any rank writes: the checkpoint directory exists, stale temporaries are gone,
// and an empty `staged` directory waits for the rank files.
void prepare_directories(const fs::path& root, const fs::path& staged) {
  std::error_code error;
  fs::create_directories(root, error);
  if (error || !fs::is_directory(root))
    throw runtime::InputError(root.string() + ": cannot create the checkpoint directory: " +
                              (error ? error.message() : std::string("not a directory")));
  for (const fs::path& entry : list_directory(root))
    if (is_stale_temporary(entry.filename().string())) remove_tree(entry);
  if (!fs::create_directory(staged, error) || error)
    throw runtime::InputError(staged.string() + ": cannot create: " +
                              (error ? error.message() : std::string("it exists")));
}

}  // namespace

void set_fault_hook_for_testing(FaultHook hook) {
  fault_hook() = std::move(hook);
}

RankFileRecord write_rank_file(const std::string& path, int rank,
                               const std::vector<TensorShard>& shards) {
  RankFileRecord record;
  record.file.name = fs::path(path).filename().string();
  record.file.rank = rank;
  int64_t offset = 0;
  for (const TensorShard& shard : shards) {
    const std::string defect = slice_defect(shard.global_shape, shard.slice);
    TRAINER_ASSERT(defect.empty(), "checkpoint shard '" << shard.name << "': " << defect);
    TRAINER_ASSERT(!shard.name.empty(), "checkpoint shard without a name");
    ManifestShard entry;
    entry.name = shard.name;
    entry.global_shape = shard.global_shape;
    entry.slice = shard.slice;
    if (entry.slice.dim == -1) entry.slice.offset = entry.slice.length = 0;
    entry.dtype = shard.dtype;
    entry.file = record.file.name;
    entry.offset = offset;
    entry.bytes = runtime::dtype_size(shard.dtype);
    for (const int64_t extent : local_shape(shard.global_shape, shard.slice)) entry.bytes *= extent;
    TRAINER_ASSERT(entry.bytes == 0 || shard.data != nullptr,
                   "checkpoint shard '" << shard.name << "' has no data");
    offset += entry.bytes;
    record.shards.push_back(std::move(entry));
  }
  FileSink sink(path);
  sink.reserve(offset);
  for (size_t i = 0; i < shards.size(); ++i)
    sink.append(shards[i].data, static_cast<size_t>(record.shards[i].bytes));
  std::tie(record.file.bytes, record.file.xxh64) = sink.finish();
  return record;
}

}  // namespace checkpoint

namespace {

// The paths of one save and the rule that ends every phase: each rank runs its
// part, then all agree on whether any failed (the staged directory goes away and
// every rank throws together).
struct SaveProtocol {
  std::filesystem::path root, final_dir, staged;
  std::string step_name;

  SaveProtocol(const std::string& dir, int64_t step)
      : root(dir),
        final_dir(root / checkpoint::step_dir_name(step)),
        staged(root / (checkpoint::step_dir_name(step) + ".tmp")),
        step_name(checkpoint::step_dir_name(step)) {}

  template <typename Body>
  void run_phase(parallel::Communicator& world, const Body& body) const {
    std::exception_ptr error;
    try {
      body();
    } catch (...) {
      error = std::current_exception();
    }
    finish_phase(world, error);
  }

  void finish_phase(parallel::Communicator& world, std::exception_ptr error) const {
    const std::vector<int> failed = checkpoint::agree_on_failures(world, error != nullptr);
    if (failed.empty()) return;
    if (world.rank() == 0) {
      std::error_code ignored;
      std::filesystem::remove_all(staged, ignored);
    }
    if (error) std::rethrow_exception(error);
    std::string ranks;
    for (const int failed_rank : failed)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(failed_rank);
    throw runtime::LibraryError(TRAINER_STR("checkpoint " << final_dir.string()
                                                          << ": the save failed on rank(s) "
                                                          << ranks << " (see their errors)"));
  }

  void prepare(parallel::Communicator& world, int64_t step) const {
    run_phase(world, [&] {  // asserts in a phase fail every rank together, as errors do
      TRAINER_ASSERT(step >= 0, "checkpoint step " << step);
      if (world.rank() == 0) checkpoint::prepare_directories(root, staged);
      checkpoint::fault_point("prepared", world.rank());
    });
  }

  std::optional<checkpoint::RankFileRecord> write(int rank, const std::vector<TensorShard>& shards,
                                                  bool writes_shards) const {
    TRAINER_ASSERT(writes_shards || shards.empty(),
                   "a rank that does not write shards passed " << shards.size());
    std::optional<checkpoint::RankFileRecord> record;
    if (writes_shards) {
      record = checkpoint::write_rank_file((staged / checkpoint::rank_file_name(rank)).string(),
                                           rank, shards);
    }
    checkpoint::fault_point("rank_file_written", rank);
    return record;
  }

  // After every rank's file is written: manifest, rename, `latest`, pruning.
  void publish(parallel::Communicator& world, const CheckpointMeta& meta,
               const std::optional<checkpoint::RankFileRecord>& record, int keep_last) const {
    using namespace checkpoint;
    const std::vector<RankFileRecord> records = gather_records(world, record);
    run_phase(world, [&] {
      const int rank = world.rank();
      if (rank != 0) return;
      Manifest manifest;
      manifest.meta = meta;
      for (const RankFileRecord& written : records) {
        manifest.files.push_back(written.file);
        manifest.shards.insert(manifest.shards.end(), written.shards.begin(), written.shards.end());
      }
      AtomicFileWriter manifest_file((staged / kManifestFileName).string());
      manifest_file.write(manifest_to_json(manifest));
      manifest_file.commit();  // fsyncs the file and the staged directory
      fault_point("manifest_written", rank);

      const std::optional<std::filesystem::path> replaced = publish_directory(staged, final_dir);
      fsync_directory(root.string());
      fault_point("renamed", rank);

      AtomicFileWriter latest((root / kLatestFileName).string());
      latest.write(step_name + "\n");
      latest.commit();  // fsyncs <dir>
      fault_point("latest_written", rank);

      if (replaced) remove_tree(*replaced);
      prune_steps(root, meta.step, keep_last);
    });
  }
};

}  // namespace

void save_checkpoint(const std::string& dir, const CheckpointMeta& meta,
                     const std::vector<TensorShard>& shards, bool writes_shards, int keep_last,
                     parallel::Communicator& world) {
  const SaveProtocol save(dir, meta.step);
  save.prepare(world, meta.step);
  std::optional<checkpoint::RankFileRecord> record;
  save.run_phase(world, [&] { record = save.write(world.rank(), shards, writes_shards); });
  save.publish(world, meta, record, keep_last);
}

struct AsyncCheckpointSave::State {
  SaveProtocol protocol;
  CheckpointMeta meta;
  runtime::Tensor snapshot;
  std::vector<TensorShard> shards;
  bool writes_shards;
  int keep_last;
  int rank;
  std::thread writer;
  std::atomic<bool> written{false};
  std::exception_ptr error;
  std::optional<checkpoint::RankFileRecord> record;
  bool published = false;
};

AsyncCheckpointSave::AsyncCheckpointSave(const std::string& dir, const CheckpointMeta& meta,
                                         runtime::Tensor snapshot,
                                         std::vector<TensorShard> shards, bool writes_shards,
                                         int keep_last, parallel::Communicator& world)
    : state_(new State{SaveProtocol(dir, meta.step), meta, std::move(snapshot), std::move(shards),
                       writes_shards, keep_last, world.rank(), {}, {}, {}, {}, false}) {
  state_->protocol.prepare(world, meta.step);
  State* s = state_.get();
  s->writer = std::thread([s] {
    try {
      s->record = s->protocol.write(s->rank, s->shards, s->writes_shards);
    } catch (...) {
      s->error = std::current_exception();
    }
    s->written.store(true, std::memory_order_release);
  });
}

AsyncCheckpointSave::~AsyncCheckpointSave() {
  if (state_ && state_->writer.joinable()) state_->writer.join();
}

bool AsyncCheckpointSave::poll(parallel::Communicator& world) {
  if (state_->published) return true;
  double pending = state_->written.load(std::memory_order_acquire) ? 0.0 : 1.0;
  world.all_reduce_sum(&pending, 1);
  if (pending > 0) return false;
  finish(world);
  return true;
}

void AsyncCheckpointSave::wait(parallel::Communicator& world) {
  if (state_->published) return;
  state_->writer.join();
  finish(world);
}

void AsyncCheckpointSave::finish(parallel::Communicator& world) {
  if (state_->writer.joinable()) state_->writer.join();
  state_->published = true;
  state_->protocol.finish_phase(world, state_->error);
  state_->protocol.publish(world, state_->meta, state_->record, state_->keep_last);
}

int64_t AsyncCheckpointSave::step() const { return state_->meta.step; }

}  // namespace trainer
