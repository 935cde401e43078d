// Megatron indexed dataset: writer/reader round trips, the .idx bytes pinned against a
// hand-built file, and one rejection test per defect (message names file and defect).
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "data_test_util.h"
#include "trainer/data/indexed_dataset.h"

namespace trainer {
namespace {

using testing::input_error_of;
using testing::patch;
using testing::read_bytes;
using testing::ScratchDir;
using testing::write_bytes;

// Offsets in the .idx of a dataset with `sequences` sequences (header is 34 bytes).
constexpr size_t kVersionAt = 9, kDtypeAt = 17, kSequenceCountAt = 18, kDocumentCountAt = 26;
constexpr size_t kLengthsAt = 34;
size_t pointers_at(size_t sequences) {
  return kLengthsAt + 4 * sequences;
}
size_t documents_at(size_t sequences) {
  return kLengthsAt + 12 * sequences;
}

void write_dataset(const std::string& prefix, TokenDType dtype,
                   const std::vector<std::vector<int32_t>>& documents) {
  IndexedDatasetWriter writer(prefix, dtype);
  for (const auto& document : documents) writer.add_document(document);
  writer.finish();
}

void expect_round_trip(TokenDType dtype, const std::vector<std::vector<int32_t>>& documents) {
  ScratchDir dir;
  const std::string prefix = dir.path("corpus");
  write_dataset(prefix, dtype, documents);

  IndexedDataset dataset(prefix);
  EXPECT_EQ(dataset.dtype(), dtype);
  EXPECT_EQ(dataset.prefix(), prefix);
  ASSERT_EQ(dataset.num_sequences(), static_cast<int64_t>(documents.size()));
  std::vector<int32_t> stream;
  std::vector<int64_t> expected_documents = {0};
  for (size_t d = 0; d < documents.size(); ++d) {
    EXPECT_EQ(dataset.sequence_lengths()[d], static_cast<int32_t>(documents[d].size()));
    stream.insert(stream.end(), documents[d].begin(), documents[d].end());
    expected_documents.push_back(static_cast<int64_t>(d + 1));
  }
  EXPECT_EQ(
      std::vector<int64_t>(dataset.document_indices().begin(), dataset.document_indices().end()),
      expected_documents);
  ASSERT_EQ(dataset.num_tokens(), static_cast<int64_t>(stream.size()));

  std::vector<int32_t> all(stream.size());
  dataset.read_tokens(0, dataset.num_tokens(), all.data());
  EXPECT_EQ(all, stream);
  // Windows crossing document boundaries.
  for (int64_t begin = 0; begin + 3 <= dataset.num_tokens(); begin += 2) {
    int32_t window[3] = {-1, -1, -1};
    dataset.read_tokens(begin, 3, window);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(window[i], stream[begin + i]) << "begin " << begin;
  }
  EXPECT_FALSE(std::filesystem::exists(prefix + ".bin.tmp"));
  EXPECT_FALSE(std::filesystem::exists(prefix + ".idx.tmp"));
}

TEST(IndexedDataset, RoundTripUint16) {
  expect_round_trip(TokenDType::uint16, {{1, 2, 3}, {}, {65535, 0, 256, 7}, {42}});
}

TEST(IndexedDataset, RoundTripInt32) {
  expect_round_trip(TokenDType::int32, {{1 << 30, 0, 70000}, {5}, {}, {2147483647, 3}});
}

TEST(IndexedDataset, RoundTripLargeDocument) {
  std::vector<int32_t> big(200'003);
  std::iota(big.begin(), big.end(), 0);
  for (auto& token : big) token %= 50'000;
  expect_round_trip(TokenDType::uint16, {big, {9, 8}});
}

// Pins the MMIDIDX layout: two documents {1, 2, 3} and {65535, 0} as uint16.
TEST(IndexedDataset, IndexBytesMatchHandBuiltMegatronFile) {
  ScratchDir dir;
  const std::string prefix = dir.path("pinned");
  write_dataset(prefix, TokenDType::uint16, {{1, 2, 3}, {65535, 0}});
  // clang-format off
  const std::vector<unsigned char> expected_idx = {
      'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0,  // magic
      1, 0, 0, 0, 0, 0, 0, 0,                   // version 1 (uint64)
      8,                                        // dtype code 8 = uint16
      2, 0, 0, 0, 0, 0, 0, 0,                   // sequence_count 2
      3, 0, 0, 0, 0, 0, 0, 0,                   // document_count 3
      3, 0, 0, 0, 2, 0, 0, 0,                   // sequence_lengths int32 {3, 2}
      0, 0, 0, 0, 0, 0, 0, 0,                   // sequence_pointers int64 {0,
      6, 0, 0, 0, 0, 0, 0, 0,                   //                          6}
      0, 0, 0, 0, 0, 0, 0, 0,                   // document_indices int64 {0,
      1, 0, 0, 0, 0, 0, 0, 0,                   //                          1,
      2, 0, 0, 0, 0, 0, 0, 0,                   //                          2}
  };
  // clang-format on
  EXPECT_EQ(read_bytes(prefix + ".idx"), expected_idx);
  const std::vector<unsigned char> expected_bin = {1, 0, 2, 0, 3, 0, 0xff, 0xff, 0, 0};
  EXPECT_EQ(read_bytes(prefix + ".bin"), expected_bin);

  // And a hand-built int32 file with a multi-sequence document reads as specified.
  const std::string manual = dir.path("manual");
  // clang-format off
  std::vector<unsigned char> idx = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
                                    4,  // int32
                                    2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
                                    1, 0, 0, 0, 2, 0, 0, 0,  // lengths {1, 2}
                                    0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0,
                                    0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0};  // one doc
  // clang-format on
  write_bytes(manual + ".idx", idx);
  write_bytes(manual + ".bin", {0x10, 0x27, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f});
  IndexedDataset dataset(manual);
  EXPECT_EQ(dataset.dtype(), TokenDType::int32);
  EXPECT_EQ(dataset.num_sequences(), 2);
  EXPECT_EQ(dataset.document_indices().size(), 2u);
  int32_t tokens[3];
  dataset.read_tokens(0, 3, tokens);
  EXPECT_EQ(tokens[0], 10000);
  EXPECT_EQ(tokens[1], 1);
  EXPECT_EQ(tokens[2], 2147483647);
}

TEST(IndexedDataset, EmptyDatasetIsValid) {
  ScratchDir dir;
  write_dataset(dir.path("empty"), TokenDType::uint16, {});
  IndexedDataset dataset(dir.path("empty"));
  EXPECT_EQ(dataset.num_sequences(), 0);
  EXPECT_EQ(dataset.num_tokens(), 0);
  EXPECT_EQ(dataset.document_indices().size(), 1u);
}

TEST(IndexedDatasetWriter, RejectsTokensOutsideTheDtype) {
  ScratchDir dir;
  const std::string prefix = dir.path("bad");
  {
    IndexedDatasetWriter writer(prefix, TokenDType::uint16);
    writer.add_document(std::vector<int32_t>{1, 2});
    std::string message = input_error_of([&] {
      writer.add_document(std::vector<int32_t>{3, 65536});
    });
    EXPECT_NE(message.find("65536"), std::string::npos) << message;
    EXPECT_NE(message.find("uint16"), std::string::npos) << message;
    EXPECT_NE(message.find("document 1 token 1"), std::string::npos) << message;
    message = input_error_of([&] { writer.add_document(std::vector<int32_t>{-1}); });
    EXPECT_NE(message.find("-1"), std::string::npos) << message;
  }
  {
    IndexedDatasetWriter writer(prefix, TokenDType::int32);
    const std::string message =
        input_error_of([&] { writer.add_document(std::vector<int32_t>{-7}); });
    EXPECT_NE(message.find("-7"), std::string::npos) << message;
  }
  // Unfinished writers leave nothing behind.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path("")));
}

TEST(IndexedDatasetWriter, UnwritableDirectoryNamesThePath) {
  const std::string message = input_error_of(
      [] { IndexedDatasetWriter writer("/nonexistent_dir_for_test/x", TokenDType::uint16); });
  EXPECT_NE(message.find("/nonexistent_dir_for_test/x.bin.tmp"), std::string::npos) << message;
}

// ---- rejection: each test corrupts one field of a valid 3-document dataset ----

class CorruptDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = dir_.path("data");
    write_dataset(prefix_, TokenDType::uint16, {{1, 2, 3}, {4, 5}, {6}});
    idx_ = prefix_ + ".idx";
    bin_ = prefix_ + ".bin";
  }
  // The reader's message; must name `file` and contain every piece of `defect`.
  void expect_rejected(const std::string& file, const std::vector<std::string>& defect) {
    const std::string message = input_error_of([&] { IndexedDataset dataset(prefix_); });
    EXPECT_NE(message.find(file), std::string::npos) << "file not named: " << message;
    for (const auto& piece : defect) {
      EXPECT_NE(message.find(piece), std::string::npos)
          << "missing \"" << piece << "\": " << message;
    }
  }
  void truncate(const std::string& path, size_t bytes) {
    std::filesystem::resize_file(path, bytes);
  }

  ScratchDir dir_;
  std::string prefix_, idx_, bin_;
};

TEST_F(CorruptDataset, MissingFiles) {
  std::filesystem::remove(bin_);
  expect_rejected(bin_, {"cannot open"});
  std::filesystem::remove(idx_);
  expect_rejected(idx_, {"cannot open"});
}

TEST_F(CorruptDataset, TruncatedHeader) {
  truncate(idx_, 20);
  expect_rejected(idx_, {"truncated", "20 bytes", "34"});
}

TEST_F(CorruptDataset, TruncatedArrays) {
  truncate(idx_, documents_at(3) + 8 * 3);  // one document index short
  expect_rejected(idx_, {"does not match", "sequence_count 3", "document_count 4"});
}

TEST_F(CorruptDataset, TrailingBytes) {
  auto bytes = read_bytes(idx_);
  bytes.push_back(0);
  write_bytes(idx_, bytes);
  expect_rejected(idx_, {"does not match"});
}

TEST_F(CorruptDataset, BadMagic) {
  patch<char>(idx_, 0, 'X');
  expect_rejected(idx_, {"bad magic", "584d4944494458"});
}

TEST_F(CorruptDataset, BadVersion) {
  patch<uint64_t>(idx_, kVersionAt, 2);
  expect_rejected(idx_, {"unsupported version 2"});
}

TEST_F(CorruptDataset, UnsupportedDtype) {
  patch<uint8_t>(idx_, kDtypeAt, 7);
  expect_rejected(idx_, {"dtype code 7", "float32"});
  patch<uint8_t>(idx_, kDtypeAt, 42);
  expect_rejected(idx_, {"dtype code 42"});
}

TEST_F(CorruptDataset, CountsThatOverflow) {
  patch<uint64_t>(idx_, kSequenceCountAt, uint64_t{1} << 62);
  expect_rejected(idx_, {"sequence_count 4611686018427387904", "exceeds the file"});
}

TEST_F(CorruptDataset, DocumentCountZero) {
  // 3 sequences and 0 documents would need 36 body bytes; shrink the file to match.
  patch<uint64_t>(idx_, kSequenceCountAt, 3);
  patch<uint64_t>(idx_, kDocumentCountAt, 0);
  auto bytes = read_bytes(idx_);
  bytes.resize(documents_at(3));
  write_bytes(idx_, bytes);
  expect_rejected(idx_, {"document_count is 0"});
}

TEST_F(CorruptDataset, DocumentIndicesNotFromZero) {
  patch<int64_t>(idx_, documents_at(3), 1);
  expect_rejected(idx_, {"document_indices[0] = 1"});
}

TEST_F(CorruptDataset, DocumentIndicesDecreasing) {
  patch<int64_t>(idx_, documents_at(3) + 8 * 1, 2);  // 0, 2, 2, 3 is fine ...
  patch<int64_t>(idx_, documents_at(3) + 8 * 2, 1);  // ... 0, 2, 1, 3 is not
  expect_rejected(idx_, {"decrease at 2", "2 then 1"});
}

TEST_F(CorruptDataset, LastDocumentIndexNotSequenceCount) {
  patch<int64_t>(idx_, documents_at(3) + 8 * 3, 2);
  expect_rejected(idx_, {"last document index 2", "sequence_count 3"});
}

TEST_F(CorruptDataset, NegativeLength) {
  patch<int32_t>(idx_, kLengthsAt + 4 * 1, -2);
  expect_rejected(idx_, {"sequence_lengths[1] = -2"});
}

TEST_F(CorruptDataset, InconsistentPointers) {
  patch<int64_t>(idx_, pointers_at(3) + 8 * 1, 4);  // should be 3 tokens * 2 bytes = 6
  expect_rejected(idx_, {"sequence_pointers[1] = 4", "expected 6"});
}

TEST_F(CorruptDataset, FirstPointerNotZero) {
  patch<int64_t>(idx_, pointers_at(3), 2);
  expect_rejected(idx_, {"sequence_pointers[0] = 2", "expected 0"});
}

TEST_F(CorruptDataset, BinTooShort) {
  truncate(bin_, 11);  // 6 tokens = 12 bytes; the last sequence is cut
  expect_rejected(bin_, {"too short", "sequence 2", "ends at byte 12", "has 11 bytes"});
}

TEST_F(CorruptDataset, BinTooLong) {
  auto bytes = read_bytes(bin_);
  bytes.insert(bytes.end(), {0, 0});
  write_bytes(bin_, bytes);
  expect_rejected(bin_, {"size 14 bytes", "total tokens 6", "12"});
}

TEST_F(CorruptDataset, LengthsDisagreeWithBin) {
  patch<int32_t>(idx_, kLengthsAt + 4 * 2, 2);  // last sequence claims 2 tokens, .bin has 1
  expect_rejected(bin_, {"too short", "sequence 2"});
}

}  // namespace
}  // namespace trainer
