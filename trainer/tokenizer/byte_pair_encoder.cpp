// The BPE merge loop, by scan (short pieces) and by heap (long ones), and its per-thread cache.
// Rules: both searches merge the lowest-ranked pair, leftmost on ties, one merge at a time, which
// is what tiktoken and Hugging Face's BPE model do; the heap skips entries a merge made stale.
#include "trainer/tokenizer/byte_pair_encoder.h"

#include <algorithm>
#include <cstring>
#include <queue>

namespace trainer::tokenizer {
namespace {

constexpr uint32_t kNoRule = ~uint32_t{0};
constexpr size_t kScanMaxBytes = 48;  // above this the heap's O(n log n) wins

uint32_t pair_rank(const BytePairModel& model, int32_t left, int32_t right) {
  const MergeRule* rule = model.merges.find(left, right);
  return rule == nullptr ? kNoRule : rule->rank;
}

// Merges tokens[0, count) in place (count <= kScanMaxBytes); returns the count left.
size_t merge_by_scan(const BytePairModel& model, int32_t* tokens, size_t count) {
  std::array<uint32_t, kScanMaxBytes> ranks;  // ranks[i]: the pair (tokens[i], tokens[i + 1])
  for (size_t i = 0; i + 1 < count; ++i) ranks[i] = pair_rank(model, tokens[i], tokens[i + 1]);
  while (count > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < count; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoRule) break;
    tokens[best] = model.merges.find(tokens[best], tokens[best + 1])->merged;
    std::copy(tokens + best + 2, tokens + count, tokens + best + 1);
    for (size_t i = best + 1; i + 2 < count; ++i) ranks[i] = ranks[i + 1];
    --count;
    if (best + 1 < count) ranks[best] = pair_rank(model, tokens[best], tokens[best + 1]);
    if (best > 0) ranks[best - 1] = pair_rank(model, tokens[best - 1], tokens[best]);
  }
  return count;
}

// A candidate merge of the part at `left` with its right neighbour, valid while both still hold
// the tokens it was made from.
struct Candidate {
  uint32_t rank;
  uint32_t left;  // position of the left part; smaller = further left
  int32_t left_token;
  int32_t right_token;
  bool operator>(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : left > other.left;
  }
};

// Merges tokens[0, count) in place; returns the count left.
size_t merge_by_heap(const BytePairModel& model, int32_t* parts, size_t count) {
  constexpr uint32_t kNone = ~uint32_t{0};
  std::vector<uint32_t> next(count), previous(count);
  std::vector<bool> alive(count, true);
  for (size_t i = 0; i < count; ++i) {
    next[i] = i + 1 < count ? static_cast<uint32_t>(i + 1) : kNone;
    previous[i] = i > 0 ? static_cast<uint32_t>(i - 1) : kNone;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](uint32_t left) {
    if (left == kNone || next[left] == kNone) return;
    const uint32_t rank = pair_rank(model, parts[left], parts[next[left]]);
    if (rank != kNoRule) heap.push({rank, left, parts[left], parts[next[left]]});
  };
  for (uint32_t i = 0; i + 1 < count; ++i) push(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    const uint32_t right = next[top.left];
    if (!alive[top.left] || right == kNone || parts[top.left] != top.left_token ||
        parts[right] != top.right_token) {
      continue;  // stale: a neighbour merged since this candidate was pushed
    }
    parts[top.left] = model.merges.find(top.left_token, top.right_token)->merged;
    alive[right] = false;
    next[top.left] = next[right];
    if (next[right] != kNone) previous[next[right]] = top.left;
    push(previous[top.left]);
    push(top.left);
  }
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i) {
    if (alive[i]) parts[kept++] = parts[i];
  }
  return kept;
}

}  // namespace

void encode_piece(const BytePairModel& model, std::string_view piece, std::vector<int32_t>* out,
                  MergeSearch search) {
  if (piece.empty()) return;
  if (!model.whole_pieces.empty()) {
    if (const auto found = model.whole_pieces.find(piece); found != model.whole_pieces.end()) {
      out->push_back(found->second);
      return;
    }
  }
  const size_t first = out->size();
  out->resize(first + piece.size());
  int32_t* tokens = out->data() + first;
  for (size_t i = 0; i < piece.size(); ++i) {
    tokens[i] = model.byte_tokens[static_cast<unsigned char>(piece[i])];
  }
  if (search == MergeSearch::automatic) {
    search = piece.size() <= kScanMaxBytes ? MergeSearch::scan : MergeSearch::heap;
  }
  const size_t count = search == MergeSearch::scan && piece.size() <= kScanMaxBytes
                           ? merge_by_scan(model, tokens, piece.size())
                           : merge_by_heap(model, tokens, piece.size());
  out->resize(first + count);
}

CachedBytePairEncoder::CachedBytePairEncoder(const BytePairModel& model)
    : model_(model), slots_(kSlots) {}

void CachedBytePairEncoder::encode(std::string_view piece, std::vector<int32_t>* out) {
  if (piece.size() > kMaxPieceBytes) {
    encode_piece(model_, piece, out);
    return;
  }
  // The piece zero-padded to kMaxPieceBytes: hashed and compared as whole 8-byte words.
  std::array<uint64_t, kMaxPieceBytes / 8> key{};
  std::memcpy(key.data(), piece.data(), piece.size());
  uint64_t hash = 0x9E3779B97F4A7C15ull ^ piece.size();
  for (const uint64_t word : key) {
    hash = (hash ^ word) * 0xFF51AFD7ED558CCDull;
    hash ^= hash >> 32;
  }
  Slot& slot = slots_[hash & (kSlots - 1)];
  if (slot.hash == hash && slot.piece_bytes == piece.size() &&
      std::memcmp(slot.piece, key.data(), kMaxPieceBytes) == 0) {
    out->insert(out->end(), slot.tokens, slot.tokens + slot.token_count);
    return;
  }
  const size_t first = out->size();
  encode_piece(model_, piece, out);
  const size_t count = out->size() - first;
  if (count <= kMaxPieceTokens) {
    slot.hash = hash;
    slot.piece_bytes = static_cast<uint8_t>(piece.size());
    slot.token_count = static_cast<uint8_t>(count);
    std::memcpy(slot.piece, key.data(), kMaxPieceBytes);
    std::copy(out->begin() + static_cast<std::ptrdiff_t>(first), out->end(), slot.tokens);
  }
}

}  // namespace trainer::tokenizer
