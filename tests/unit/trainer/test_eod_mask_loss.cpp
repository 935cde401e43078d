// The end-of-document switches in the training loop. data.eod_mask_loss (Megatron's
// --eod-mask-loss): the targets counted per batch, an id that never occurs changing no bit, a
// masked run's log and loss, and the refusals (no end-of-document id, data.eod_id without a
// switch, out of range, or against the tokenizer's). data.reset_attention_mask (Megatron's
// --reset-attention-mask): each position's document start, and the same checks.
// data.reset_position_ids (Megatron's --reset-position-ids): the same checks, learned and rotary
// positions. The loss is checked against an independent reference in
// tests/system/llama_reference.sh, across layouts in tests/mpi
// (Layouts.EodMaskLossMatchesOneProcessWithin1e5, Layouts.DocumentMaskMatchesOneProcessWithin1e5,
// Layouts.DocumentPositionsMatchOneProcessWithin1e5), and the kernels one by one in
// tests/unit/kernels.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "trainer/engine/training_data.h"
#include "trainer/planning/calibrate.h"
#include "trainer/planning/run_plan.h"
#include "trainer_test_util.h"

namespace trainer {
namespace {

using testing_support::CorpusDir;
using testing_support::InProcessRun;

constexpr int32_t kLetterE = 101;  // frequent in the synthetic text: it stands for the eod

// The corpus's tokens, read from <prefix>.bin (uint16) by hand.
std::vector<int32_t> corpus_tokens(const std::string& prefix) {
  std::ifstream in(prefix + ".bin", std::ios::binary);
  std::vector<int32_t> tokens;
  for (uint16_t token = 0; in.read(reinterpret_cast<char*>(&token), sizeof token);)
    tokens.push_back(token);
  return tokens;
}

TEST(EodMaskLoss, TheCountedTargetsAreThePositionsWhoseInputIsNotTheEod) {
  CorpusDir dir;
  InProcessRun run(dir.config("run", {"data.eod_mask_loss=true", "data.eod_id=101"}));
  ASSERT_EQ(run.trainer->data().masked_input(), kLetterE);
  // data.shuffle is false: sample i is tokens [16 i, 16 i + 17), batch k samples [8k, 8k + 8).
  const std::vector<int32_t> tokens = corpus_tokens(dir / "data");
  for (int64_t batch : {0, 3}) {
    const auto begin = tokens.begin() + batch * 8 * 16;
    const int64_t want = 8 * 16 - std::count(begin, begin + 8 * 16, kLetterE);
    EXPECT_EQ(counted_targets(run.trainer->data().train(), batch * 8, 8, 16, kLetterE), want);
    EXPECT_LT(want, 8 * 16) << "the batch has an 'e' to mask";
  }
  EXPECT_EQ(counted_targets(run.trainer->data().train(), 0, 8, 16, std::nullopt), 8 * 16);
  EXPECT_NE(run.log.str().find("loss: positions whose input is the eod id 101 take no part "
                               "(data.eod_mask_loss)"),
            std::string::npos)
      << run.log.str();
}

// The runs of `common` without and with `switched`: losses, validation loss and weights the same
// bits.
void expect_no_bit_changed(const std::vector<std::string>& common,
                           const std::vector<std::string>& switched) {
  CorpusDir dir;
  std::vector<std::string> with = common;
  with.insert(with.end(), switched.begin(), switched.end());
  InProcessRun plain(dir.config("plain", common)), never(dir.config("never", with));
  const TrainSummary a = plain.trainer->run(), b = never.trainer->run();
  EXPECT_EQ(a.first_loss, b.first_loss);
  EXPECT_EQ(a.last_loss, b.last_loss);
  ASSERT_TRUE(a.last_val_loss.has_value());
  EXPECT_EQ(a.last_val_loss, b.last_val_loss);
  EXPECT_TRUE(
      testing_support::same_bytes(plain.trainer->params().flat, never.trainer->params().flat));
}

// One step of `common` without and with `switched` (ending documents at 'e'): the loss and the
// update differ; returns the switched run's log.
std::string expect_first_step_changed(const std::vector<std::string>& switched,
                                      const std::vector<std::string>& common = {}) {
  CorpusDir dir;
  std::vector<std::string> with = common;
  with.insert(with.end(), switched.begin(), switched.end());
  InProcessRun plain(dir.config("plain", common)), masked(dir.config("masked", with));
  const StepMetrics a = plain.trainer->train_step(), b = masked.trainer->train_step();
  EXPECT_TRUE(std::isfinite(b.loss));
  EXPECT_NE(a.loss, b.loss);
  EXPECT_FALSE(
      testing_support::same_bytes(plain.trainer->params().flat, masked.trainer->params().flat));
  return masked.log.str();
}

// Byte 255 never occurs in the synthetic text: every target counts, and the loss scale 1/128
// is the same power of two, so losses, validation losses and weights are the same bits.
TEST(EodMaskLoss, AnIdThatNeverOccursChangesNoBit) {
  expect_no_bit_changed({"train.eval_interval=3", "train.eval_iters=2", "model.hidden_dropout=0.1"},
                        {"data.eod_mask_loss=true", "data.eod_id=255"});
}

// Masking 'e': the loss is a mean over fewer targets (its first step differs from the plain
// run's), and the runs' weights part.
TEST(EodMaskLoss, MaskingChangesTheLossAndTheUpdate) {
  expect_first_step_changed({"data.eod_mask_loss=true", "data.eod_id=101"});
}

TEST(EodMaskLoss, RefusalsNameTheFieldsAndValues) {
  CorpusDir dir;
  // The synthetic corpus's byte tokenizer has no eod.
  testing_support::expect_error<runtime::ConfigError>(
      [&] { InProcessRun run(dir.config("a", {"data.eod_mask_loss=true"})); },
      {"data.eod_mask_loss: true needs the end-of-document id", dir / "data.json",
       "set data.eod_id"},
      "no eod id anywhere");
  testing_support::expect_error<runtime::ConfigError>(
      [&] { InProcessRun run(dir.config("b", {"data.eod_id=101"})); },
      {"data.eod_id: 101 is only read with data.eod_mask_loss, data.reset_attention_mask or "
       "data.reset_position_ids true (all are false)"},
      "eod_id alone");
  testing_support::expect_error<runtime::ConfigError>(
      [&] {
        InProcessRun run(dir.config("c", {"data.eod_mask_loss=true", "data.eod_id=256"}));
      },
      {"data.eod_id: must be a token id below model.vocab_size 256", "got 256"}, "out of range");
  testing_support::name_tokenizer(dir / "data", "hf", 200);  // eod id 199
  testing_support::expect_error<runtime::ConfigError>(
      [&] {
        InProcessRun run(dir.config("d", {"data.eod_mask_loss=true", "data.eod_id=101"}));
      },
      {"data.eod_id: 101 differs from the eod id 199 of the hf tokenizer", dir / "data.json",
       "(data.path)"},
      "against the tokenizer's");
  InProcessRun named(dir.config("e", {"data.eod_mask_loss=true"}));
  EXPECT_EQ(named.trainer->data().masked_input(), 199);
}

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
  expect_no_bit_changed(
      {"train.eval_interval=3", "train.eval_iters=2", "model.attention_dropout=0.1"},
      {"data.reset_attention_mask=true", "data.eod_id=255"});
}

// Ending documents at 'e' (id 101, frequent in the synthetic text): the first loss and the update
// differ from the plain run's, and the log says so.
TEST(DocumentMask, MaskingChangesTheLossAndTheUpdate) {
  const std::string log =
      expect_first_step_changed({"data.reset_attention_mask=true", "data.eod_id=101"});
  EXPECT_NE(log.find("attention: stops at each eod id 101; a document sees only its own tokens "
                     "(data.reset_attention_mask)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("; attention timed without the documents' mask, which flash runs faster)"),
            std::string::npos)
      << log;
}

// The documents a calibration times are the run's first microbatches' (Note [Timed documents]):
// up to 8 of them, each sample's starts as the training step builds them.
TEST(DocumentMask, CalibrationTimesTheFirstMicrobatchesDocuments) {
  CorpusDir dir;
  const Config config = dir.config("c", {"data.reset_attention_mask=true", "data.eod_id=101"});
  const std::vector<std::vector<int32_t>> documents = calibration_documents(config);
  const int64_t T = config.model.seq_length, B = config.train.micro_batch_size;
  ASSERT_EQ(documents.size(), static_cast<size_t>(config.train.global_batch_size / B));  // 2
  const TrainingData data(config);
  std::vector<int32_t> sample(static_cast<size_t>(T + 1)), starts(static_cast<size_t>(T));
  bool several = false;
  for (size_t mb = 0; mb < documents.size(); ++mb) {
    ASSERT_EQ(documents[mb].size(), static_cast<size_t>(T * B));
    for (int64_t b = 0; b < B; ++b) {
      data.train().sample(static_cast<int64_t>(mb) * B + b, sample.data());
      document_starts(std::span<const int32_t>(sample.data(), static_cast<size_t>(T)), kLetterE,
                      starts);
      for (int64_t t = 0; t < T; ++t) {
        EXPECT_EQ(documents[mb][static_cast<size_t>(t * B + b)], starts[static_cast<size_t>(t)]);
        several |= starts[static_cast<size_t>(t)] > 0;
      }
    }
  }
  EXPECT_TRUE(several) << "the samples should pack several documents";
  EXPECT_TRUE(calibration_documents(dir.config("d")).empty());
}

// recompute.auto planning by time calibrates at startup with the run's documents: its profile's
// shapes say so, and so does the predicted step's line.
TEST(DocumentMask, StartupCalibrationTimesTheDocuments) {
  CorpusDir dir;
  const Config config = dir.config(
      "auto", {"data.reset_attention_mask=true", "data.eod_id=101", "recompute.auto=true",
               "train.memory_budget_gib=1", "model.attention_backend=flash"});
  InProcessRun run(config);
  const std::string log = run.log.str();
  EXPECT_NE(log.find("attention timed with the documents of the run's first microbatches"),
            std::string::npos)
      << log;
  const TimeProfile profile = read_time_profile(run_profile_path(config));
  EXPECT_TRUE(profile.shapes.ends_with(" documents")) << profile.shapes;
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

// Byte 255 never occurs in the synthetic text: one document per sequence, positions running as
// without the switch, the same bits (learned positions, dropout on).
TEST(DocumentPositions, AnIdThatNeverOccursChangesNoBit) {
  expect_no_bit_changed({"train.eval_interval=3", "train.eval_iters=2", "model.hidden_dropout=0.1"},
                        {"data.reset_position_ids=true", "data.eod_id=255"});
}

// Ending documents at 'e': GPT-2's learned positions and, without the mask, Llama's rotary ones
// restart, so the first loss and the update differ from the plain run's; the log says so, and
// names no attention mask.
TEST(DocumentPositions, ResettingChangesTheLossAndTheUpdate) {
  const std::string log =
      expect_first_step_changed({"data.reset_position_ids=true", "data.eod_id=101"});
  EXPECT_NE(log.find("positions: restart at 0 after each eod id 101 (data.reset_position_ids)"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("attention: stops"), std::string::npos) << log;
  expect_first_step_changed({"data.reset_position_ids=true", "data.eod_id=101"},
                            testing_support::llama_overrides());
}

// Under the mask a document's rotary scores depend on position differences only, which the reset
// keeps: the loss of a masked Llama run moves by rounding alone when its positions restart too.
TEST(DocumentPositions, RotaryPositionsUnderTheMaskChangeOnlyRounding) {
  CorpusDir dir;
  std::vector<std::string> masked = testing_support::llama_overrides();
  masked.insert(masked.end(), {"data.reset_attention_mask=true", "data.eod_id=101"});
  std::vector<std::string> both = masked;
  both.push_back("data.reset_position_ids=true");
  InProcessRun a(dir.config("masked", masked)), b(dir.config("both", both));
  for (int step = 0; step < 3; ++step) {
    const double la = a.trainer->train_step().loss, lb = b.trainer->train_step().loss;
    EXPECT_NEAR(lb, la, 1e-6 * std::abs(la)) << "step " << step + 1;
  }
}

TEST(DocumentPositions, RefusalsNameTheFieldsAndValues) {
  CorpusDir dir;
  testing_support::expect_error<runtime::ConfigError>(
      [&] { InProcessRun run(dir.config("a", {"data.reset_position_ids=true"})); },
      {"data.reset_position_ids: true needs the end-of-document id", dir / "data.json",
       "set data.eod_id"},
      "no eod id anywhere");
  testing_support::name_tokenizer(dir / "data", "hf", 200);  // eod id 199
  InProcessRun named(dir.config("b", {"data.reset_position_ids=true"}));
  EXPECT_EQ(named.trainer->data().document_end(), 199);
}

}  // namespace
}  // namespace trainer
