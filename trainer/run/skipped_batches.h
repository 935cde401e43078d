// The global batches a run does not read (data.skip_batches, and the windows a guard rewind
// skipped), and so the batch each optimizer step trains on. Batches are numbered as a run
// without skips reads them: step s reads batch s - 1; with skips, the s-th batch not skipped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace trainer {

class SkippedBatches {
 public:
  SkippedBatches() = default;
  explicit SkippedBatches(const std::vector<BatchRange>& ranges);

  // Adds [first, last] to the set (ranges merge).
  void add(BatchRange range);
  // The batch the 1-based optimizer step trains on.
  int64_t batch_of_step(int64_t step) const;
  // Sorted, disjoint and not adjacent.
  const std::vector<BatchRange>& ranges() const { return ranges_; }

  // "4-6,10-12" (empty: none), as a checkpoint stores it; parse() reads it back and throws
  // runtime::InputError naming `source` when the text is malformed.
  std::string to_text() const;
  static SkippedBatches parse(const std::string& text, const std::string& source);

 private:
  std::vector<BatchRange> ranges_;
};

}  // namespace trainer
