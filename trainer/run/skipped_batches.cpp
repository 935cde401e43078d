// SkippedBatches: a sorted set of batch ranges and the step -> batch map over it.
#include "trainer/run/skipped_batches.h"

#include <algorithm>
#include <charconv>

#include "runtime/error.h"

namespace trainer {

SkippedBatches::SkippedBatches(const std::vector<BatchRange>& ranges) {
  for (const BatchRange& range : ranges) add(range);
}

void SkippedBatches::add(BatchRange range) {
  TRAINER_ASSERT(range.first >= 0 && range.last >= range.first,
                 "bad batch range [" << range.first << ", " << range.last << "]");
  std::vector<BatchRange> merged;
  for (const BatchRange& r : ranges_) {
    if (r.last + 1 < range.first || range.last + 1 < r.first) {
      merged.push_back(r);
    } else {  // overlapping or adjacent: absorbed
      range = {.first = std::min(r.first, range.first), .last = std::max(r.last, range.last)};
    }
  }
  merged.push_back(range);
  std::sort(merged.begin(), merged.end(),
            [](const BatchRange& a, const BatchRange& b) { return a.first < b.first; });
  ranges_ = std::move(merged);
}

int64_t SkippedBatches::batch_of_step(int64_t step) const {
  int64_t batch = step - 1;
  for (const BatchRange& r : ranges_) {  // sorted: each range before `batch` pushes it on
    if (r.first > batch) break;
    batch += r.last - r.first + 1;
  }
  return batch;
}

std::string SkippedBatches::to_text() const {
  std::string text;
  for (const BatchRange& r : ranges_) {
    if (!text.empty()) text += ',';
    text += std::to_string(r.first) + "-" + std::to_string(r.last);
  }
  return text;
}

SkippedBatches SkippedBatches::parse(const std::string& text, const std::string& source) {
  SkippedBatches skipped;
  auto fail = [&] {
    throw runtime::InputError(source + ": malformed skipped batches '" + text +
                              "' (expected first-last,first-last,...)");
  };
  const char* at = text.data();
  const char* const end = text.data() + text.size();
  while (at < end) {
    BatchRange range;
    auto [after_first, error] = std::from_chars(at, end, range.first);
    if (error != std::errc() || after_first == end || *after_first != '-') fail();
    auto [after_last, error_last] = std::from_chars(after_first + 1, end, range.last);
    if (error_last != std::errc() || range.first < 0 || range.last < range.first) fail();
    if (after_last != end && *after_last != ',') fail();
    skipped.add(range);
    at = after_last == end ? end : after_last + 1;
  }
  return skipped;
}

}  // namespace trainer
