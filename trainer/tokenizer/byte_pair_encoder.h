// The byte-level BPE merge loop shared by the gpt2, hf and tiktoken tokenizers: a piece's bytes
// start as one token each, then the adjacent pair of lowest rank merges (leftmost on ties) until
// no pair has a rule. Rules: the model is read-only once built; the cache is per thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trainer/tokenizer/pair_merge_table.h"

namespace trainer::tokenizer {

// Hash and equality that let a std::string-keyed map be probed with a std::string_view.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringViewHash, std::equal_to<>>;

struct BytePairModel {
  std::array<int32_t, 256> byte_tokens{};  // the token of each single byte
  PairMergeTable merges;
  // Pieces looked up whole before any merge (tiktoken; tokenizer.json's ignore_merges).
  StringMap<int32_t> whole_pieces;
};

// How the merge loop finds the lowest pair: a scan of all pairs per merge (fast for short pieces)
// or a heap (long pieces). Both give the same tokens; automatic picks by length.
enum class MergeSearch { automatic, scan, heap };

// Appends the tokens of one piece (no cache).
void encode_piece(const BytePairModel& model, std::string_view piece, std::vector<int32_t>* out,
                  MergeSearch search = MergeSearch::automatic);

// A per-thread cache of the tokens of frequent pieces in front of encode_piece: a direct-mapped
// table of short pieces with their tokens stored inline (no allocation; a colliding piece simply
// replaces the older one, which only costs a recomputation).
class CachedBytePairEncoder {
 public:
  explicit CachedBytePairEncoder(const BytePairModel& model);
  void encode(std::string_view piece, std::vector<int32_t>* out);

 private:
  static constexpr size_t kMaxPieceBytes = 24;  // a multiple of 8: compared as words
  static constexpr size_t kMaxPieceTokens = 7;
  static constexpr size_t kSlots = size_t{1} << 16;  // 4 MiB per thread
  struct Slot {
    uint64_t hash = 0;
    uint8_t piece_bytes = 0;  // 0: empty
    uint8_t token_count = 0;
    char piece[kMaxPieceBytes];
    int32_t tokens[kMaxPieceTokens];
  };
  const BytePairModel& model_;
  std::vector<Slot> slots_;
};
}  // namespace trainer::tokenizer
