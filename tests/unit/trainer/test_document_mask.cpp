// data.reset_attention_mask (Megatron's --reset-attention-mask) in the training loop: each
// position's document start, an id that never occurs changing no bit, a masked run's log and
// loss, and the refusals. The attention itself is checked against an independent reference in
// tests/system/llama_reference.sh, across layouts in tests/mpi
// (Layouts.DocumentMaskMatchesOneProcessWithin1e5) and kernel by kernel in tests/unit/kernels.
#include <cmath>

#include "trainer_test_util.h"

namespace trainer {
namespace {

using testing_support::CorpusDir;
using testing_support::InProcessRun;

// An eod ends its own document: the position after it starts the next one, and two eods in a row
// make a one-token document.
TEST(DocumentMask, StartsFollowTheEods) {
  const std::vector<int32_t> inputs = {5, 9, 0, 7, 0, 0, 3, 4};
  std::vector<int32_t> starts(inputs.size(), -1);
  document_starts(inputs, 0, starts);
  EXPECT_EQ(starts, (std::vector<int32_t>{0, 0, 0, 3, 3, 5, 6, 6}));
  document_starts(inputs, 42, starts);  // never occurs: one document
  EXPECT_EQ(starts, std::vector<int32_t>(inputs.size(), 0));
}

// Byte 255 never occurs in the synthetic text: one document per sequence, the same bits as a
// run without the mask (losses, validation loss, weights).
TEST(DocumentMask, AnIdThatNeverOccursChangesNoBit) {
  CorpusDir dir;
  const std::vector<std::string> common = {"train.eval_interval=3", "train.eval_iters=2",
                                           "model.attention_dropout=0.1"};
  std::vector<std::string> masked = common;
  masked.insert(masked.end(), {"data.reset_attention_mask=true", "data.eod_id=255"});
  InProcessRun plain(dir.config("plain", common)), never(dir.config("never", masked));
  const TrainSummary a = plain.trainer->run(), b = never.trainer->run();
  EXPECT_EQ(a.first_loss, b.first_loss);
  EXPECT_EQ(a.last_loss, b.last_loss);
  ASSERT_TRUE(a.last_val_loss.has_value());
  EXPECT_EQ(a.last_val_loss, b.last_val_loss);
  EXPECT_TRUE(
      testing_support::same_bytes(plain.trainer->params().flat, never.trainer->params().flat));
}

// Ending documents at 'e' (id 101, frequent in the synthetic text): the first loss and the update
// differ from the plain run's, the log says so, and the validation loss is finite.
TEST(DocumentMask, MaskingChangesTheLossAndTheUpdate) {
  CorpusDir dir;
  InProcessRun plain(dir.config("plain")),
      masked(dir.config("masked", {"data.reset_attention_mask=true", "data.eod_id=101"}));
  ASSERT_EQ(masked.trainer->data().document_end(), 101);
  EXPECT_FALSE(plain.trainer->data().document_end().has_value());
  const StepMetrics a = plain.trainer->train_step(), b = masked.trainer->train_step();
  EXPECT_TRUE(std::isfinite(b.loss));
  EXPECT_NE(a.loss, b.loss);
  EXPECT_FALSE(
      testing_support::same_bytes(plain.trainer->params().flat, masked.trainer->params().flat));
  EXPECT_NE(masked.log.str().find("attention: stops at each eod id 101; a document sees only its "
                                  "own tokens (data.reset_attention_mask)"),
            std::string::npos)
      << masked.log.str();
}

TEST(DocumentMask, RefusalsNameTheFieldsAndValues) {
  CorpusDir dir;
  // The synthetic corpus's byte tokenizer has no eod.
  testing_support::expect_error<runtime::ConfigError>(
      [&] { InProcessRun run(dir.config("a", {"data.reset_attention_mask=true"})); },
      {"data.reset_attention_mask: true needs the end-of-document id", dir / "data.json",
       "set data.eod_id"},
      "no eod id anywhere");
  testing_support::expect_error<runtime::ConfigError>(
      [&] {
        InProcessRun run(dir.config("b", {"data.reset_attention_mask=true", "data.eod_id=-2"}));
      },
      {"data.eod_id: must be a token id below model.vocab_size 256", "got -2"}, "negative");
  testing_support::name_tokenizer(dir / "data", "hf", 200);  // eod id 199
  InProcessRun named(dir.config("c", {"data.reset_attention_mask=true"}));
  EXPECT_EQ(named.trainer->data().document_end(), 199);
  EXPECT_FALSE(named.trainer->data().masked_input().has_value());
}

}  // namespace
}  // namespace trainer
