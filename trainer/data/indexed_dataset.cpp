// Reader and writer of Megatron MMIDIDX indexed datasets (<prefix>.idx + <prefix>.bin).
// Rules: nothing in a file is trusted until validated; every defect of a file is an
// InputError naming the path and the values; writers publish files by fsync + rename.
#include "trainer/data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "runtime/error.h"

namespace trainer {

static_assert(std::endian::native == std::endian::little,
              "the MMIDIDX format is little endian and is read in place");

// Note [Index copied out of the map]
// The .idx header is 34 bytes (9 magic + 8 version + 1 dtype + 8 + 8 counts), so the
// int32 lengths and int64 pointers that follow are not aligned to their size. Reading
// them through typed pointers into the map would be undefined behaviour; instead the
// file is mapped, validated and its lengths and document indices are memcpy'd into
// vectors (12 bytes per sequence). The .bin stays mapped: its tokens start at offset 0
// of a page-aligned map, so token i of either dtype is naturally aligned.

namespace {

constexpr unsigned char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
constexpr uint64_t kIndexVersion = 1;
constexpr int64_t kIndexHeaderBytes = 9 + 8 + 1 + 8 + 8;

int64_t itemsize_bytes(TokenDType dtype) {
  return dtype == TokenDType::uint16 ? 2 : 4;
}

const char* dtype_name(TokenDType dtype) {
  return dtype == TokenDType::uint16 ? "uint16" : "int32";
}

const char* megatron_dtype_name(int code) {
  static const char* const kNames[] = {"?",     "uint8",   "int8",    "int16", "int32",
                                       "int64", "float64", "float32", "uint16"};
  return code >= 1 && code <= 8 ? kNames[code] : "unknown";
}

// A read-only mapping of a whole file; empty files are not mapped (mmap rejects length 0).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      throw runtime::InputError(TRAINER_STR(path << ": cannot open: " << std::strerror(errno)));
    }
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      const int saved = errno;
      ::close(fd);
      throw runtime::InputError(TRAINER_STR(path << ": not a readable regular file"
                                                 << (saved ? ": " : "")
                                                 << (saved ? std::strerror(saved) : "")));
    }
    bytes_ = static_cast<int64_t>(info.st_size);
    if (bytes_ > 0) {
      void* data = ::mmap(nullptr, static_cast<size_t>(bytes_), PROT_READ, MAP_SHARED, fd, 0);
      if (data == MAP_FAILED) {
        const int saved = errno;
        ::close(fd);
        throw runtime::InputError(
            TRAINER_STR(path << ": cannot mmap " << bytes_ << " bytes: " << std::strerror(saved)));
      }
      data_ = static_cast<const unsigned char*>(data);
    }
    ::close(fd);
  }
  ~MappedFile() { release(); }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  // Hands the mapping to the caller, who munmaps it.
  const unsigned char* take() {
    const unsigned char* data = data_;
    data_ = nullptr;
    return data;
  }

 private:
  void release() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), static_cast<size_t>(bytes_));
    data_ = nullptr;
  }
  const unsigned char* data_ = nullptr;
  int64_t bytes_ = 0;
};

template <typename T>
T load(const unsigned char* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

// Every defect of an indexed dataset file is an InputError naming the file.
runtime::InputError dataset_error(const std::string& path, const std::string& defect) {
  return runtime::InputError(TRAINER_STR("indexed dataset " << path << ": " << defect));
}

// The fixed header of a .idx: token dtype and the two counts, bounded by the file size.
struct IndexHeader {
  TokenDType dtype = TokenDType::uint16;
  int64_t num_sequences = 0;
  int64_t num_documents = 0;
};

void check_magic(const unsigned char* header, const std::string& idx_path) {
  if (std::memcmp(header, kIndexMagic, sizeof(kIndexMagic)) == 0) return;
  std::string found;
  for (size_t i = 0; i < sizeof(kIndexMagic); ++i) {
    char hex[4];
    std::snprintf(hex, sizeof(hex), "%02x", header[i]);
    found += hex;
  }
  throw dataset_error(
      idx_path, TRAINER_STR("bad magic: found bytes "
                            << found << ", expected \"MMIDIDX\\0\\0\" (4d4d4944494458 0000)"));
}

IndexHeader read_index_header(const MappedFile& idx, const std::string& idx_path) {
  const unsigned char* header = idx.data();
  if (idx.bytes() < kIndexHeaderBytes) {
    throw dataset_error(
        idx_path, TRAINER_STR("truncated: " << idx.bytes() << " bytes, the header alone needs "
                                            << kIndexHeaderBytes));
  }
  check_magic(header, idx_path);
  const auto version = load<uint64_t>(header + 9);
  if (version != kIndexVersion) {
    throw dataset_error(
        idx_path, TRAINER_STR("unsupported version " << version << ", expected " << kIndexVersion));
  }
  const int dtype_code = header[17];
  if (dtype_code != static_cast<int>(TokenDType::uint16) &&
      dtype_code != static_cast<int>(TokenDType::int32)) {
    throw dataset_error(idx_path,
                        TRAINER_STR("unsupported token dtype code "
                                    << dtype_code << " (" << megatron_dtype_name(dtype_code)
                                    << "); supported: 8 (uint16) and 4 (int32)"));
  }
  const auto sequence_count = load<uint64_t>(header + 18);
  const auto document_count = load<uint64_t>(header + 26);
  // Both counts are bounded by the file size before any product is formed.
  const auto body_bytes = static_cast<uint64_t>(idx.bytes() - kIndexHeaderBytes);
  if (sequence_count > body_bytes / 12 || document_count > body_bytes / 8 ||
      sequence_count * 12 + document_count * 8 != body_bytes) {
    const bool small = sequence_count <= body_bytes / 12 && document_count <= body_bytes / 8;
    throw dataset_error(
        idx_path, TRAINER_STR("size " << idx.bytes() << " bytes does not match sequence_count "
                                      << sequence_count << " and document_count " << document_count
                                      << " (expected " << kIndexHeaderBytes
                                      << " + 12 * sequence_count + 8 * document_count"
                                      << (small ? ")" : ", which exceeds the file)")));
  }
  if (document_count < 1) {
    throw dataset_error(idx_path,
                        "document_count is 0; document_indices must hold at least the leading 0");
  }
  return {static_cast<TokenDType>(dtype_code), static_cast<int64_t>(sequence_count),
          static_cast<int64_t>(document_count)};
}

// Document indices: 0, non-decreasing, ending at the sequence count.
void check_document_indices(const std::vector<int64_t>& indices, int64_t num_sequences,
                            const std::string& idx_path) {
  if (indices.front() != 0) {
    throw dataset_error(idx_path,
                        TRAINER_STR("document_indices[0] = " << indices.front() << ", expected 0"));
  }
  for (size_t i = 1; i < indices.size(); ++i) {
    if (indices[i] < indices[i - 1]) {
      throw dataset_error(idx_path,
                          TRAINER_STR("document_indices decrease at " << i << ": " << indices[i - 1]
                                                                      << " then " << indices[i]));
    }
  }
  if (indices.back() != num_sequences) {
    throw dataset_error(
        idx_path, TRAINER_STR("last document index " << indices.back() << " != sequence_count "
                                                     << num_sequences));
  }
}

// Lengths and pointers: sequences lie back to back from byte 0 and fill the .bin exactly.
// Returns the number of tokens.
int64_t check_sequences(const std::vector<int32_t>& lengths, const unsigned char* pointers_at,
                        TokenDType dtype, int64_t bin_bytes, const std::string& idx_path,
                        const std::string& bin_path) {
  const int64_t itemsize = itemsize_bytes(dtype);
  int64_t expected_pointer = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int32_t length = lengths[i];
    if (length < 0) {
      throw dataset_error(
          idx_path, TRAINER_STR("sequence_lengths[" << i << "] = " << length << " is negative"));
    }
    const auto pointer = load<int64_t>(pointers_at + 8 * i);
    if (pointer != expected_pointer) {
      throw dataset_error(
          idx_path, TRAINER_STR("sequence_pointers[" << i << "] = " << pointer << ", expected "
                                                     << expected_pointer
                                                     << " (sequences back to back: pointer[i-1] + "
                                                     << "length[i-1] * " << itemsize << " bytes)"));
    }
    expected_pointer += static_cast<int64_t>(length) * itemsize;
    if (expected_pointer > bin_bytes) {
      throw dataset_error(
          bin_path, TRAINER_STR("too short: sequence "
                                << i << " (pointer " << pointer << ", " << length << " tokens of "
                                << itemsize << " bytes) ends at byte " << expected_pointer
                                << " but the file has " << bin_bytes << " bytes"));
    }
  }
  if (expected_pointer != bin_bytes) {
    throw dataset_error(
        bin_path,
        TRAINER_STR("size " << bin_bytes << " bytes != total tokens " << expected_pointer / itemsize
                            << " * " << itemsize << " bytes (" << dtype_name(dtype)
                            << ") = " << expected_pointer << " listed by " << idx_path));
  }
  return expected_pointer / itemsize;
}

}  // namespace

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  const std::string idx_path = prefix + ".idx";
  const std::string bin_path = prefix + ".bin";
  MappedFile idx(idx_path);
  const IndexHeader header = read_index_header(idx, idx_path);
  dtype_ = header.dtype;
  const unsigned char* lengths_at = idx.data() + kIndexHeaderBytes;
  const unsigned char* pointers_at = lengths_at + 4 * header.num_sequences;
  const unsigned char* documents_at = pointers_at + 8 * header.num_sequences;
  sequence_lengths_.resize(static_cast<size_t>(header.num_sequences));
  document_indices_.resize(static_cast<size_t>(header.num_documents));
  if (header.num_sequences > 0)
    std::memcpy(sequence_lengths_.data(), lengths_at, 4 * header.num_sequences);
  std::memcpy(document_indices_.data(), documents_at, 8 * header.num_documents);
  check_document_indices(document_indices_, header.num_sequences, idx_path);

  MappedFile bin(bin_path);
  num_tokens_ =
      check_sequences(sequence_lengths_, pointers_at, dtype_, bin.bytes(), idx_path, bin_path);
  bin_bytes_ = bin.bytes();
  bin_map_ = bin.take();
}

IndexedDataset::~IndexedDataset() {
  if (bin_map_ != nullptr) {
    ::munmap(const_cast<unsigned char*>(bin_map_), static_cast<size_t>(bin_bytes_));
  }
}

int64_t IndexedDataset::num_sequences() const {
  return static_cast<int64_t>(sequence_lengths_.size());
}

int64_t IndexedDataset::num_tokens() const {
  return num_tokens_;
}

std::span<const int32_t> IndexedDataset::sequence_lengths() const {
  return sequence_lengths_;
}

std::span<const int64_t> IndexedDataset::document_indices() const {
  return document_indices_;
}

void IndexedDataset::read_tokens(int64_t begin, int64_t count, int32_t* out) const {
  TRAINER_ASSERT(begin >= 0 && count >= 0 && count <= num_tokens_ - begin,
                 "read_tokens [" << begin << ", " << begin << " + " << count << ") outside the "
                                 << num_tokens_ << " tokens of " << prefix_);
  if (count == 0) return;
  if (dtype_ == TokenDType::uint16) {
    const auto* tokens = reinterpret_cast<const uint16_t*>(bin_map_) + begin;
    for (int64_t i = 0; i < count; ++i) out[i] = tokens[i];
  } else {
    std::memcpy(out, bin_map_ + 4 * begin, static_cast<size_t>(4 * count));
  }
}

// ---------------------------------------------------------------------------------------
// Writer

namespace {

void write_or_throw(std::FILE* file, const void* data, size_t bytes, const std::string& path) {
  if (bytes > 0 && std::fwrite(data, 1, bytes, file) != bytes) {
    throw runtime::LibraryError(TRAINER_STR("write of " << bytes << " bytes to " << path
                                                        << " failed: " << std::strerror(errno)));
  }
}

// Flushes, fsyncs and closes; the file is closed even when a step fails.
void close_durably(std::FILE* file, const std::string& path) {
  const bool ok = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const int saved = errno;
  const bool closed = std::fclose(file) == 0;
  if (!ok || !closed) {
    throw runtime::LibraryError(TRAINER_STR(
        "flush/fsync/close of " << path << " failed: " << std::strerror(ok ? errno : saved)));
  }
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw runtime::LibraryError(
        TRAINER_STR("rename " << from << " -> " << to << " failed: " << std::strerror(errno)));
  }
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& prefix, TokenDType dtype)
    : prefix_(prefix), dtype_(dtype) {
  const std::string path = prefix_ + ".bin.tmp";
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    throw runtime::InputError(
        TRAINER_STR("cannot create " << path << ": " << std::strerror(errno)));
  }
  bin_file_ = file;
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (finished_) return;
  if (bin_file_ != nullptr) std::fclose(static_cast<std::FILE*>(bin_file_));
  std::remove((prefix_ + ".bin.tmp").c_str());
  std::remove((prefix_ + ".idx.tmp").c_str());
}

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens) {
  TRAINER_ASSERT(!finished_ && bin_file_ != nullptr, "add_document after finish() on " << prefix_);
  const int64_t document = static_cast<int64_t>(sequence_lengths_.size());
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw runtime::InputError(TRAINER_STR(prefix_ << ": document " << document << " has "
                                                  << tokens.size()
                                                  << " tokens; Megatron lengths are "
                                                  << "int32 (at most 2147483647)"));
  }
  const int64_t max_token =
      dtype_ == TokenDType::uint16 ? 65535 : std::numeric_limits<int32_t>::max();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > max_token) {
      throw runtime::InputError(TRAINER_STR(
          prefix_ << ": document " << document << " token " << i << " = " << tokens[i]
                  << " does not fit " << dtype_name(dtype_) << " [0, " << max_token << "]"));
    }
  }
  auto* file = static_cast<std::FILE*>(bin_file_);
  const std::string path = prefix_ + ".bin.tmp";
  if (dtype_ == TokenDType::int32) {
    write_or_throw(file, tokens.data(), tokens.size() * 4, path);
  } else {
    constexpr size_t kChunkTokens = 1 << 13;  // 16 KiB on the stack
    uint16_t chunk[kChunkTokens];
    for (size_t start = 0; start < tokens.size(); start += kChunkTokens) {
      const size_t n = std::min(kChunkTokens, tokens.size() - start);
      for (size_t i = 0; i < n; ++i) chunk[i] = static_cast<uint16_t>(tokens[start + i]);
      write_or_throw(file, chunk, n * 2, path);
    }
  }
  sequence_lengths_.push_back(static_cast<int32_t>(tokens.size()));
}

void IndexedDatasetWriter::finish() {
  TRAINER_ASSERT(!finished_ && bin_file_ != nullptr, "finish() called twice on " << prefix_);
  const std::string bin_tmp = prefix_ + ".bin.tmp";
  const std::string idx_tmp = prefix_ + ".idx.tmp";
  auto* bin = static_cast<std::FILE*>(bin_file_);
  bin_file_ = nullptr;
  close_durably(bin, bin_tmp);

  // One sequence per document: document_indices = 0, 1, ..., sequence_count.
  const auto sequence_count = static_cast<uint64_t>(sequence_lengths_.size());
  const uint64_t document_count = sequence_count + 1;
  std::vector<int64_t> pointers(sequence_count);
  std::vector<int64_t> document_indices(document_count);
  int64_t pointer = 0;
  for (uint64_t i = 0; i < sequence_count; ++i) {
    pointers[i] = pointer;
    pointer += static_cast<int64_t>(sequence_lengths_[i]) * itemsize_bytes(dtype_);
    document_indices[i] = static_cast<int64_t>(i);
  }
  document_indices[sequence_count] = static_cast<int64_t>(sequence_count);

  std::FILE* idx = std::fopen(idx_tmp.c_str(), "wb");
  if (idx == nullptr) {
    throw runtime::InputError(
        TRAINER_STR("cannot create " << idx_tmp << ": " << std::strerror(errno)));
  }
  try {
    const auto dtype_code = static_cast<uint8_t>(dtype_);
    write_or_throw(idx, kIndexMagic, sizeof(kIndexMagic), idx_tmp);
    write_or_throw(idx, &kIndexVersion, 8, idx_tmp);
    write_or_throw(idx, &dtype_code, 1, idx_tmp);
    write_or_throw(idx, &sequence_count, 8, idx_tmp);
    write_or_throw(idx, &document_count, 8, idx_tmp);
    write_or_throw(idx, sequence_lengths_.data(), 4 * sequence_count, idx_tmp);
    write_or_throw(idx, pointers.data(), 8 * sequence_count, idx_tmp);
    write_or_throw(idx, document_indices.data(), 8 * document_count, idx_tmp);
  } catch (...) {
    std::fclose(idx);
    throw;
  }
  close_durably(idx, idx_tmp);
  rename_or_throw(bin_tmp, prefix_ + ".bin");
  rename_or_throw(idx_tmp, prefix_ + ".idx");
  finished_ = true;
}

}  // namespace trainer
