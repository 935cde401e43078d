// The merge loop: lowest rank first, leftmost on ties, one merge at a time; the scan and heap
// searches give the same tokens on every piece; whole pieces and the cache change nothing.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "tokenizer_test_util.h"
#include "trainer/tokenizer/bpe_tokenizer.h"

namespace trainer::tokenizer {
namespace {

// Bytes are their own ids; merges are given as (left, right, merged) in rank order.
BytePairModel tiny_model(const std::vector<std::array<int32_t, 3>>& merges) {
  BytePairModel model;
  for (int byte = 0; byte < 256; ++byte) model.byte_tokens[byte] = byte;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    model.merges.assign(merges[rank][0], merges[rank][1],
                        {static_cast<uint32_t>(rank), merges[rank][2]});
  }
  return model;
}

std::vector<int32_t> encode(const BytePairModel& model, std::string_view piece,
                            MergeSearch search) {
  std::vector<int32_t> ids;
  encode_piece(model, piece, &ids, search);
  return ids;
}

TEST(BytePairEncoder, LowestRankFirstLeftmostOnTies) {
  constexpr int32_t kAb = 300, kBc = 301, kAa = 302, kAaAa = 303;
  const BytePairModel model =
      tiny_model({{'a', 'b', kAb}, {'b', 'c', kBc}, {'a', 'a', kAa}, {kAa, kAa, kAaAa}});
  for (const MergeSearch search : {MergeSearch::scan, MergeSearch::heap}) {
    EXPECT_EQ(encode(model, "abc", search), (std::vector<int32_t>{kAb, 'c'}));
    EXPECT_EQ(encode(model, "bca", search), (std::vector<int32_t>{kBc, 'a'}));
    EXPECT_EQ(encode(model, "aaa", search), (std::vector<int32_t>{kAa, 'a'}));  // leftmost
    EXPECT_EQ(encode(model, "aaaa", search), (std::vector<int32_t>{kAaAa}));
    EXPECT_EQ(encode(model, "aaaaa", search), (std::vector<int32_t>{kAaAa, 'a'}));
    EXPECT_EQ(encode(model, "x", search), (std::vector<int32_t>{'x'}));
  }
}

TEST(BytePairEncoder, WholePiecesAreLookedUpBeforeMerging) {
  BytePairModel model = tiny_model({{'a', 'b', 300}});
  model.whole_pieces.emplace("abc", 400);  // unreachable by merges, still used whole
  EXPECT_EQ(encode(model, "abc", MergeSearch::automatic), (std::vector<int32_t>{400}));
  EXPECT_EQ(encode(model, "abcd", MergeSearch::automatic), (std::vector<int32_t>{300, 'c', 'd'}));
}

TEST(BytePairEncoder, ScanAndHeapAgreeOnGpt2Merges) {
  const nlohmann::json vocab_json =
      nlohmann::json::parse(testing::read_text(testing::fixture("small_gpt2_vocab.json")));
  StringMap<int32_t> vocab;
  for (const auto& [token, id] : vocab_json.items()) vocab.emplace(token, id.get<int32_t>());
  std::vector<std::pair<std::string, std::string>> merges;
  std::istringstream merges_text(testing::read_text(testing::fixture("small_gpt2_merges.txt")));
  std::string line;
  std::getline(merges_text, line);  // #version
  while (std::getline(merges_text, line)) {
    const size_t space = line.find(' ');
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  const BytePairModel model = byte_level_model(
      vocab, merges, false, "small_gpt2",
      [](const std::string& file, size_t index) { return file + " " + std::to_string(index); });
  std::string text;
  for (const std::string& document : testing::corpus_documents()) text += document;
  std::mt19937 random(7);
  CachedBytePairEncoder cached(model);
  size_t merged_pieces = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t length = 1 + random() % 48;  // the scan takes pieces up to 48 bytes
    const size_t start = random() % (text.size() - length);
    const std::string_view piece = std::string_view(text).substr(start, length);
    const std::vector<int32_t> by_scan = encode(model, piece, MergeSearch::scan);
    EXPECT_EQ(by_scan, encode(model, piece, MergeSearch::heap)) << piece;
    std::vector<int32_t> by_cache;
    cached.encode(piece, &by_cache);
    cached.encode(piece, &by_cache);  // the second call is served from the cache when short
    by_cache.resize(by_cache.size() / 2);
    EXPECT_EQ(by_scan, by_cache);
    merged_pieces += by_scan.size() < piece.size();
  }
  EXPECT_GT(merged_pieces, 1800u);  // the merges did work (long pieces: the reference tests)
}

}  // namespace
}  // namespace trainer::tokenizer
