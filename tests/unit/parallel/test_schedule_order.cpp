// Pipeline op lists as message streams: for every pair of stages, the messages one sends to
// the other arrive in the order the receiver asks for them. MPI would match out-of-order
// messages by tag, but NCCL has no tags (a send meets the peer's next receive), so the NCCL
// path is only correct because of this property. Also: every message sent is received once.
#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "parallel/pipeline/schedules.h"

namespace {

using parallel::ScheduleKind;
using parallel::ScheduleOp;

struct Message {
  int64_t microbatch, chunk;  // the chunk that consumes it
  bool gradient;
  bool operator==(const Message&) const = default;
};

using Pair = std::pair<int64_t, int64_t>;  // (from stage, to stage)

// Sends and receives of every stage, in op order, by the rules of schedules.cpp's runner:
// a forward receives its input unless it is the first chunk of stage 0 and sends its output
// unless it is the last chunk of the last stage (to the next stage; from the last stage, to
// chunk + 1 of stage 0); a backward mirrors that with gradients.
void streams(ScheduleKind kind, int64_t stages, int64_t chunks, int64_t microbatches,
             std::map<Pair, std::vector<Message>>& sent,
             std::map<Pair, std::vector<Message>>& received) {
  for (int64_t stage = 0; stage < stages; ++stage) {
    const int64_t next = (stage + 1) % stages, previous = (stage + stages - 1) % stages;
    for (const ScheduleOp& op : parallel::schedule_ops(kind, stages, stage, chunks, microbatches)) {
      const bool first = stage == 0 && op.chunk == 0;
      const bool last = stage == stages - 1 && op.chunk == chunks - 1;
      if (op.forward) {
        if (!first) received[{previous, stage}].push_back({op.microbatch, op.chunk, false});
        if (!last) {
          const int64_t to_chunk = stage == stages - 1 ? op.chunk + 1 : op.chunk;
          sent[{stage, next}].push_back({op.microbatch, to_chunk, false});
        }
      } else {
        if (!last) received[{next, stage}].push_back({op.microbatch, op.chunk, true});
        if (!first) {
          const int64_t to_chunk = stage == 0 ? op.chunk - 1 : op.chunk;
          sent[{stage, previous}].push_back({op.microbatch, to_chunk, true});
        }
      }
    }
  }
}

TEST(ScheduleOrder, MessagesBetweenTwoStagesArriveInTheOrderTheyAreReceived) {
  struct Case {
    ScheduleKind kind;
    int64_t stages, chunks, microbatches;
  };
  std::vector<Case> cases;
  for (int64_t stages : {int64_t{2}, int64_t{3}, int64_t{4}, int64_t{8}}) {
    for (int64_t microbatches : {stages, 2 * stages, 3 * stages})
      cases.push_back({ScheduleKind::one_f_one_b, stages, 1, microbatches});
    for (int64_t microbatches : {int64_t{1}, stages - 1, stages + 1})
      cases.push_back({ScheduleKind::one_f_one_b, stages, 1, microbatches});
    for (int64_t chunks : {int64_t{2}, int64_t{3}})
      for (int64_t microbatches : {stages, 2 * stages})
        cases.push_back({ScheduleKind::interleaved, stages, chunks, microbatches});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << (c.kind == ScheduleKind::interleaved ? "interleaved" : "1F1B") << " stages "
                 << c.stages << " chunks " << c.chunks << " microbatches " << c.microbatches);
    std::map<Pair, std::vector<Message>> sent, received;
    streams(c.kind, c.stages, c.chunks, c.microbatches, sent, received);
    EXPECT_EQ(sent.size(), received.size());
    for (const auto& [pair, messages] : sent) {
      const auto it = received.find(pair);
      ASSERT_NE(it, received.end()) << "stage " << pair.first << " -> " << pair.second;
      ASSERT_EQ(messages.size(), it->second.size())
          << "stage " << pair.first << " -> " << pair.second;
      for (size_t i = 0; i < messages.size(); ++i) {
        ASSERT_EQ(messages[i], it->second[i])
            << "stage " << pair.first << " -> " << pair.second << ", message " << i << ": sent (mb "
            << messages[i].microbatch << ", chunk " << messages[i].chunk
            << (messages[i].gradient ? ", grad" : "") << "), received (mb "
            << it->second[i].microbatch << ", chunk " << it->second[i].chunk
            << (it->second[i].gradient ? ", grad" : "") << ")";
      }
    }
  }
}

}  // namespace
