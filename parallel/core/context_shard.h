// Which positions of the sequence a context-parallel rank holds (Note [Context chunks]): the
// map from local rows to global positions that the data, the position embedding, dropout and
// ring attention all follow.
#pragma once

#include <cstdint>
#include <vector>

namespace parallel {

// Note [Context chunks]
// With context parallelism N the sequence of T positions is cut into 2N chunks of c = T / 2N
// positions, and cp rank r holds chunk r as its local rows [0, c) and chunk 2N - 1 - r as its
// rows [c, 2c). Under causal attention chunk k attends to k + 1 chunks, so every rank's two
// chunks attend to 2N + 1 chunks in all: the work is equal on every rank (Megatron-Core's
// load-balanced order). Sequence parallelism then splits the T / N local rows over tp as it
// splits the T rows without context parallelism. Everything addressed by position (tokens,
// targets, the position embedding, the dropout masks of Note [Dropout RNG]) is addressed by
// the global position of the row, so a cp layout samples and drops exactly what one process
// does. With N = 1 the local rows are the positions themselves.

// Rows [row, row + rows) of a rank's local sequence are positions [position, position + rows).
struct RowSegment {
  int64_t row = 0;
  int64_t position = 0;
  int64_t rows = 0;
};

struct ContextShard {
  int64_t size = 1;  // cp: ranks in the ring
  int64_t rank = 0;  // this rank's place in it
  int64_t seq = 0;   // T: positions of the unsharded sequence

  int64_t local_seq() const { return seq / size; }
  int64_t chunk() const { return seq / (2 * size); }
  // Global position of the first row of chunk `index` (0 or 1) held by cp rank `holder`.
  int64_t chunk_position(int64_t holder, int64_t index) const {
    return (index == 0 ? holder : 2 * size - 1 - holder) * chunk();
  }
  // Global position of local row `row` of this rank.
  int64_t position(int64_t row) const {
    if (size == 1) return row;
    return chunk_position(rank, row / chunk()) + row % chunk();
  }
  // Local rows [first, first + rows) as runs of consecutive positions: one run, or two when the
  // rows cross from the first chunk into the second.
  std::vector<RowSegment> segments(int64_t first, int64_t rows) const {
    std::vector<RowSegment> runs;
    if (size == 1 || first + rows <= chunk() || first >= chunk()) {
      runs.push_back({first, position(first), rows});
      return runs;
    }
    runs.push_back({first, position(first), chunk() - first});
    runs.push_back({chunk(), position(chunk()), first + rows - chunk()});
    return runs;
  }
};

}  // namespace parallel
