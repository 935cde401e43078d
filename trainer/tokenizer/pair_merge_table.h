// BPE merge rules keyed by the pair of token ids they join: an open-addressing hash table, the
// lookup on the merge loop's hot path. Rules: built once, then read-only (shared by threads);
// a pair given twice keeps its last rule, as Hugging Face's tokenizer.json loader does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainer::tokenizer {

struct MergeRule {
  uint32_t rank = 0;   // lower merges first
  int32_t merged = 0;  // the token the pair becomes
};

class PairMergeTable {
 public:
  void assign(int32_t left, int32_t right, MergeRule rule);
  // nullptr when the pair has no rule.
  const MergeRule* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pair_key(left, right);
    for (uint64_t slot = hash(key) & mask_;; slot = (slot + 1) & mask_) {
      if (slots_[slot].key == key) return &slots_[slot].rule;
      if (slots_[slot].key == kEmptyKey) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};  // ids are >= 0, so no pair has this key
  struct Slot {
    uint64_t key = kEmptyKey;
    MergeRule rule;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
  }
  static uint64_t hash(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 20; }
  void grow();

  std::vector<Slot> slots_;  // capacity a power of two, at most half full
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace trainer::tokenizer
