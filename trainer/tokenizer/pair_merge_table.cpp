// PairMergeTable: insertion and growth (lookups are inline in the header).
// Rules: the table doubles before it is half full, so probes stay short.
#include "trainer/tokenizer/pair_merge_table.h"

namespace trainer::tokenizer {

void PairMergeTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  size_ = 0;
  for (const Slot& slot : old) {
    if (slot.key != kEmptyKey) {
      assign(static_cast<int32_t>(slot.key >> 32), static_cast<int32_t>(slot.key & 0xFFFFFFFFu),
             slot.rule);
    }
  }
}

void PairMergeTable::assign(int32_t left, int32_t right, MergeRule rule) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pair_key(left, right);
  for (uint64_t slot = hash(key) & mask_;; slot = (slot + 1) & mask_) {
    if (slots_[slot].key == key) {
      slots_[slot].rule = rule;
      return;
    }
    if (slots_[slot].key == kEmptyKey) {
      slots_[slot] = Slot{key, rule};
      ++size_;
      return;
    }
  }
}

}  // namespace trainer::tokenizer
