// Opening the run's datasets: names, tokenizers from <path>.json and their checks, train and
// validation samplers per dataset, the blend. Rules: errors name the YAML path of the dataset
// (data.path or data.blend[i]) and the file; nothing here depends on the parallel layout.
#include "trainer/engine/training_data.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <set>

#include "runtime/error.h"
#include "trainer/data/dataset_metadata.h"

namespace trainer {

std::vector<std::string> dataset_names(const std::vector<std::string>& paths) {
  std::vector<std::string> bases;
  for (const std::string& path : paths) {
    std::filesystem::path p(path);
    if (p.filename().empty()) p = p.parent_path();  // "data/web/" names web
    bases.push_back(p.filename().string());
  }
  std::set<std::string> taken(bases.begin(), bases.end());
  std::vector<std::string> names;
  std::set<std::string> used;
  for (const std::string& base : bases) {
    std::string name = base;
    for (int suffix = 2; used.count(name) > 0 || (name != base && taken.count(name) > 0);
         ++suffix) {
      name = base + "_" + std::to_string(suffix);
    }
    used.insert(name);
    names.push_back(name);
  }
  return names;
}

void check_tokenizers(const std::vector<DataSource>& sources, const model::GptConfig& model) {
  const DataSource* reference = nullptr;
  for (const DataSource& source : sources) {
    if (!source.tokenizer) continue;
    const tokenizer::TokenizerIdentity& identity = *source.tokenizer;
    if (identity.vocab_size > model.vocab_size) {
      throw runtime::ConfigError(
          "model.vocab_size", std::to_string(model.vocab_size) + " is below the vocab_size " +
                                  std::to_string(identity.vocab_size) + " of the " + identity.kind +
                                  " tokenizer that " + source.path + ".json names (" +
                                  source.field + "); set model.vocab_size to at least " +
                                  std::to_string(identity.vocab_size));
    }
    if (reference == nullptr) {
      reference = &source;
    } else if (!same_tokenizer(*reference->tokenizer, identity)) {
      throw runtime::ConfigError(
          "data.blend",
          "datasets '" + reference->path + "' (" + reference->field + ") and '" + source.path +
              "' (" + source.field +
              ") were made by different tokenizers: " + describe_tokenizer(*reference->tokenizer) +
              " and " + describe_tokenizer(identity) + "; their ids do not mean the same tokens");
    }
  }
}

TrainingData::TrainingData(const Config& config) {
  const model::GptConfig& m = config.model;
  const std::vector<BlendEntry> entries = data_sources(config.data);
  std::vector<std::string> paths;
  double total = 0;
  for (const BlendEntry& entry : entries) {
    paths.push_back(entry.path);
    total += entry.weight;
  }
  const std::vector<std::string> names = dataset_names(paths);
  sources_.resize(entries.size());
  for (size_t k = 0; k < entries.size(); ++k) {
    DataSource& source = sources_[k];
    source.path = entries[k].path;
    source.name = names[k];
    source.field =
        config.data.blend.empty() ? "data.path" : "data.blend[" + std::to_string(k) + "]";
    source.weight = entries[k].weight / total;
    source.tokenizer = read_dataset_tokenizer(source.path);
  }
  check_tokenizers(sources_, m);
  if (config.data.eod_mask_loss || config.data.document_starts()) {
    const int32_t eod = end_of_document_id(sources_, config.data);
    if (config.data.eod_mask_loss) masked_input_ = eod;
    if (config.data.document_starts()) document_end_ = eod;
  }

  std::vector<const SampleSource*> train_samplers;
  std::vector<double> weights;
  for (size_t k = 0; k < sources_.size(); ++k) {
    DataSource& source = sources_[k];
    source.dataset = std::make_unique<IndexedDataset>(source.path);
    const std::vector<SampleRange> ranges =
        split_samples(*source.dataset, m.seq_length, config.data.split);
    source.train = std::make_unique<GptSampler>(
        *source.dataset, m.seq_length, ranges[0], config.data.shuffle,
        blend_dataset_seed(config.train.seed, static_cast<int64_t>(k)), m.vocab_size);
    if (ranges.size() > 1 && ranges[1].count > 0) {
      source.validation = std::make_unique<GptSampler>(*source.dataset, m.seq_length, ranges[1],
                                                       false, config.train.seed, m.vocab_size);
    }
    train_samplers.push_back(source.train.get());
    weights.push_back(entries[k].weight);
  }
  blend_ = std::make_unique<BlendedSampler>(train_samplers, weights);
  SyntheticEntropy entropy;
  if (sources_.size() == 1 && read_synthetic_metadata(sources_[0].path, &entropy))
    entropy_ = entropy;
}

int32_t end_of_document_id(const std::vector<DataSource>& sources, const DataConfig& data) {
  const DataSource* named = nullptr;
  for (const DataSource& source : sources) {
    if (source.tokenizer && source.tokenizer->eod_id) {
      named = &source;
      break;
    }
  }
  if (data.eod_id >= 0) {
    const auto id = static_cast<int32_t>(data.eod_id);
    if (named != nullptr && *named->tokenizer->eod_id != id) {
      throw runtime::ConfigError("data.eod_id",
                                 std::to_string(id) + " differs from the eod id " +
                                     std::to_string(*named->tokenizer->eod_id) + " of the " +
                                     named->tokenizer->kind + " tokenizer that " + named->path +
                                     ".json names (" + named->field + "); unset data.eod_id");
    }
    return id;
  }
  if (named == nullptr) {
    std::string paths;
    for (const DataSource& source : sources)
      paths += (paths.empty() ? "" : ", ") + source.path + ".json";
    throw runtime::ConfigError(
        data.eod_mask_loss          ? "data.eod_mask_loss"
        : data.reset_attention_mask ? "data.reset_attention_mask"
                                    : "data.reset_position_ids",
        "true needs the end-of-document id, and no tokenizer with one is named by " + paths +
            "; set data.eod_id");
  }
  return *named->tokenizer->eod_id;
}

void document_starts(std::span<const int32_t> inputs, int32_t eod, std::span<int32_t> starts) {
  TRAINER_ASSERT(starts.size() == inputs.size(), "document_starts: " << starts.size()
                                                                     << " starts for "
                                                                     << inputs.size() << " inputs");
  int32_t start = 0;
  for (size_t p = 0; p < inputs.size(); ++p) {
    starts[p] = start;
    if (inputs[p] == eod) start = static_cast<int32_t>(p + 1);
  }
}

std::vector<std::vector<int32_t>> leading_document_starts(const TrainingData& data,
                                                          int64_t seq_length, int64_t micro_batch,
                                                          int64_t microbatches) {
  TRAINER_ASSERT(data.document_end().has_value(), "leading_document_starts without an eod id");
  const auto T = static_cast<size_t>(seq_length), B = static_cast<size_t>(micro_batch);
  std::vector<int32_t> sample(T + 1), starts(T);
  std::vector<std::vector<int32_t>> all;
  for (int64_t mb = 0; mb < microbatches; ++mb) {
    std::vector<int32_t>& rows = all.emplace_back(T * B);
    for (size_t b = 0; b < B; ++b) {
      data.train().sample(mb * micro_batch + static_cast<int64_t>(b), sample.data());
      document_starts(std::span<const int32_t>(sample.data(), T), *data.document_end(), starts);
      for (size_t t = 0; t < T; ++t) rows[t * B + b] = starts[t];
    }
  }
  return all;
}

int64_t counted_targets(const SampleSource& sampler, int64_t first, int64_t samples,
                        int64_t seq_length, std::optional<int32_t> masked_input) {
  if (!masked_input) return samples * seq_length;
  std::vector<int32_t> tokens(static_cast<size_t>(seq_length + 1));
  int64_t counted = 0;
  for (int64_t index = first; index < first + samples; ++index) {
    sampler.sample(index, tokens.data());
    counted += seq_length - std::count(tokens.begin(), tokens.end() - 1, *masked_input);
  }
  return counted;
}

void TrainingData::describe(std::ostream& log, const DataConfig& data) const {
  auto counts = [](const DataSource& source) {
    return std::to_string(source.dataset->num_tokens()) + " tokens; " +
           std::to_string(source.train->num_samples()) + " train samples" +
           (source.validation
                ? ", " + std::to_string(source.validation->num_samples()) + " validation"
                : std::string());
  };
  if (sources_.size() == 1) {
    log << "data: " << sources_[0].path << " (" << counts(sources_[0]) << ")\n";
  } else {
    log << "data: a blend of " << sources_.size() << " datasets\n";
    for (const DataSource& source : sources_) {
      char weight[32];
      std::snprintf(weight, sizeof weight, "%.4g", source.weight);
      log << "  " << source.name << ": " << source.path << ", weight " << weight << " ("
          << counts(source) << ")\n";
    }
  }
  const DataSource* known = nullptr;
  std::string unknown;
  for (const DataSource& source : sources_) {
    if (source.tokenizer && known == nullptr) known = &source;
    if (!source.tokenizer) unknown += (unknown.empty() ? "" : ", ") + source.path;
  }
  if (known == nullptr) {
    log << "tokenizer: unknown (no <path>.json names one)\n";
  } else {
    log << "tokenizer: " << describe_tokenizer(*known->tokenizer);
    if (!unknown.empty()) log << "; unknown for " << unknown << " (no <path>.json names one)";
    log << "\n";
  }
  if (masked_input_) {
    log << "loss: positions whose input is the eod id " << *masked_input_
        << " take no part (data.eod_mask_loss)\n";
  }
  if (document_end_ && data.reset_attention_mask) {
    log << "attention: stops at each eod id " << *document_end_
        << "; a document sees only its own tokens (data.reset_attention_mask)\n";
  }
  if (document_end_ && data.reset_position_ids) {
    log << "positions: restart at 0 after each eod id " << *document_end_
        << " (data.reset_position_ids)\n";
  }
}

}  // namespace trainer
