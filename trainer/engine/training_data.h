// The datasets a run reads (data.path or data.blend; docs/data.md), each with its tokenizer,
// split and sampler, and the training blend over them. Rules: tokenizers are checked before any
// dataset is opened; every rank builds the same samplers from the config alone.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/data/blended_sampler.h"
#include "trainer/data/gpt_sampler.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/synthetic.h"
#include "trainer/tokenizer/tokenizer.h"

namespace trainer {

// One dataset of the run, in blend order.
struct DataSource {
  std::string path;   // the prefix of <path>.bin / <path>.idx
  std::string name;   // in metrics (val_loss/<name>): see dataset_names
  std::string field;  // its YAML path in messages: data.path or data.blend[i]
  double weight = 1;  // normalised over the blend
  std::optional<tokenizer::TokenizerIdentity> tokenizer;  // from <path>.json; none: unknown
  std::unique_ptr<IndexedDataset> dataset;
  std::unique_ptr<GptSampler> train;
  std::unique_ptr<GptSampler> validation;  // null when data.split gives validation no weight
};

class TrainingData {
 public:
  // Reads every <path>.json, checks the tokenizers (check_tokenizers), then opens the datasets
  // and builds the samplers: dataset k shuffles with blend_dataset_seed(train.seed, k).
  explicit TrainingData(const Config& config);

  // The training samples: the blend (a blend of one is its dataset's order).
  const BlendedSampler& train() const { return *blend_; }
  const std::vector<DataSource>& sources() const { return sources_; }
  bool has_validation() const { return sources_.front().validation != nullptr; }
  // The loss floor's entropies: a single dataset that is a synthetic corpus.
  const std::optional<SyntheticEntropy>& entropy() const { return entropy_; }
  // With data.eod_mask_loss, the input token whose position takes no part in the loss (the
  // end-of-document id: data.eod_id, else the datasets' tokenizer's); none without it.
  std::optional<int32_t> masked_input() const { return masked_input_; }
  // With data.reset_attention_mask or data.reset_position_ids, the token that ends a document
  // (the same end-of-document id); none without either.
  std::optional<int32_t> document_end() const { return document_end_; }
  // The startup log's lines: each dataset (name, weight, tokens, samples), the tokenizer, and
  // what the end-of-document switches of `data` (the config this was built from) do.
  void describe(std::ostream& log, const DataConfig& data) const;

 private:
  std::vector<DataSource> sources_;
  std::unique_ptr<BlendedSampler> blend_;
  std::optional<SyntheticEntropy> entropy_;
  std::optional<int32_t> masked_input_;
  std::optional<int32_t> document_end_;
};

// The end-of-document id of data.eod_mask_loss, data.reset_attention_mask and
// data.reset_position_ids (ConfigError, naming the first of them that is set, when there is none):
// data.eod_id when set (it must equal the eod id of a tokenizer the datasets name), else the first
// dataset's tokenizer's that has one. Checked after check_tokenizers, so every named tokenizer is
// the same.
int32_t end_of_document_id(const std::vector<DataSource>& sources, const DataConfig& data);

// starts[p] = the position of the first token of position p's document in `inputs` (a sample's
// input tokens): the position after the last `eod` before p, 0 if none (Note [Document masking]
// in runtime/op_args.h). An eod ends its own document.
void document_starts(std::span<const int32_t> inputs, int32_t eod, std::span<int32_t> starts);

// The document starts of the training blend's first `microbatches` microbatches of
// `micro_batch` samples (samples 0, 1, ...), each (seq_length, micro_batch) over the whole
// sequence, [t * micro_batch + b]: what a calibration times the attention with under
// data.reset_attention_mask (CalibrationOptions::document_starts). `data` must have a
// document_end().
std::vector<std::vector<int32_t>> leading_document_starts(const TrainingData& data,
                                                          int64_t seq_length, int64_t micro_batch,
                                                          int64_t microbatches);

// The targets of `samples` samples from `first` that count toward the loss: every position
// (samples x seq_length), less, with `masked_input`, the positions whose input is that token.
int64_t counted_targets(const SampleSource& sampler, int64_t first, int64_t samples,
                        int64_t seq_length, std::optional<int32_t> masked_input);

// The metric names of datasets at `paths`: each path's basename (its last component, trailing
// slashes ignored); when several share one, the first keeps it and the later ones get "_2",
// "_3", ... in blend order, skipping any name another dataset already has.
std::vector<std::string> dataset_names(const std::vector<std::string>& paths);

// The data's tokenizers against the model (ConfigError): a tokenizer whose vocab_size exceeds
// model.vocab_size names both values and the <path>.json; two datasets made by different
// tokenizers (same_tokenizer) name both datasets and both tokenizers. Datasets without a known
// tokenizer are not checked.
void check_tokenizers(const std::vector<DataSource>& sources, const model::GptConfig& model);

}  // namespace trainer
