// Megatron indexed datasets (the MMIDIDX format of megatron/core/datasets):
// <prefix>.idx holds the index, <prefix>.bin the tokens of every document back
// to back. The reader memory-maps both and validates the index before use.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace trainer {

// Megatron DType codes: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
// 7 float32, 8 uint16. Token files are written as uint16 or int32.
enum class TokenDType : uint8_t { uint16 = 8, int32 = 4 };

class IndexedDataset {
 public:
  // Opens <prefix>.idx and <prefix>.bin. Throws runtime::InputError naming the file
  // and the defect (missing, bad magic, unsupported version or dtype, truncated,
  // lengths/pointers inconsistent with the .bin size).
  explicit IndexedDataset(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  const std::string& prefix() const { return prefix_; }
  TokenDType dtype() const { return dtype_; }
  int64_t num_sequences() const;       // documents as written (Megatron "sequences")
  int64_t num_tokens() const;          // tokens of all sequences, concatenated
  std::span<const int32_t> sequence_lengths() const;
  std::span<const int64_t> document_indices() const;

  // Copies tokens [begin, begin + count) of the concatenated stream into out.
  void read_tokens(int64_t begin, int64_t count, int32_t* out) const;

 private:
  std::string prefix_;
  TokenDType dtype_ = TokenDType::uint16;
  // See Note [Index copied out of the map] in indexed_dataset.cpp: the .idx is
  // mapped while it is parsed; its arrays are copied because they are unaligned.
  std::vector<int32_t> sequence_lengths_;
  std::vector<int64_t> document_indices_;
  int64_t num_tokens_ = 0;
  const unsigned char* bin_map_ = nullptr;  // mmap of <prefix>.bin (null when empty)
  int64_t bin_bytes_ = 0;
};

// Writes <prefix>.bin and <prefix>.idx (through temporary files renamed at finish()).
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(const std::string& prefix, TokenDType dtype);
  ~IndexedDatasetWriter();  // removes the temporaries when finish() was not called
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // One document = one sequence. Throws InputError if a token does not fit the dtype.
  void add_document(std::span<const int32_t> tokens);
  void finish();

 private:
  std::string prefix_;
  TokenDType dtype_;
  void* bin_file_ = nullptr;  // FILE*
  std::vector<int32_t> sequence_lengths_;
  bool finished_ = false;
};

}  // namespace trainer
