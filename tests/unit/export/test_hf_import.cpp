// The rows a tensor-parallel rank asks an HF import for are the rows of the whole parameter,
// bit for bit, for every transform of both tables (Llama: copy, vocabulary rows with padding, q,
// k and v joined by kv group; GPT-2: copy, vocabulary rows, transposes, the QKV permutation), and
// a row-split read reads only those rows of the file.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/gpt_params.h"
#include "runtime/allocator.h"
#include "trainer/export/hf_gpt2.h"
#include "trainer/export/hf_llama.h"

namespace trainer {
namespace {

SafetensorsFile as_file(const std::vector<SafetensorsEntry>& entries) {
  SafetensorsFile file;
  for (const SafetensorsEntry& e : entries) file.tensors[e.name] = e;
  return file;
}

// For every parameter and every split of its rows into `parts` (whole kv groups for QKV), the
// rows read alone equal those rows of the whole parameter; those `alone` names cost the bytes of
// their rows only.
void expect_rows_are_slices(HfImport& import, const model::GptParams& params,
                            const model::GptConfig& config,
                            const std::function<bool(const std::string&)>& alone) {
  for (const model::NamedParam& p : params.named) {
    SCOPED_TRACE(p.name);
    const std::vector<float> whole = import.values(p.name);
    ASSERT_EQ(static_cast<int64_t>(whole.size()), p.tensor.numel());
    const int64_t rows = p.global_shape[0], row = p.tensor.numel() / rows;
    const bool qkv = p.name.find("linear_qkv") != std::string::npos;
    const int64_t unit = qkv ? rows / config.query_groups() : 1;  // rows a split must keep whole
    for (int64_t parts : {2, 4}) {
      if (rows % (parts * unit) != 0) continue;
      const int64_t each = rows / parts;
      for (int64_t part = 0; part < parts; ++part) {
        const int64_t before = import.bytes_read();
        const std::vector<float> got = import.values(p.name, part * each, each);
        ASSERT_EQ(got, std::vector<float>(whole.begin() + part * each * row,
                                          whole.begin() + (part + 1) * each * row))
            << "part " << part << " of " << parts;
        if (alone(p.name)) {
          EXPECT_EQ(import.bytes_read() - before, 4 * each * row) << "read beyond its rows";
        }
      }
    }
  }
}

// The model of `config` with init_params' values, exported by `to_hf` and opened as `Import`.
template <typename Import, typename ToHf>
struct Exported {
  Exported(const model::GptConfig& config, ToHf to_hf)
      : params(model::GptParams::allocate(allocator, config, runtime::MemoryCategory::param)) {
    model::init_params(params, config, 11);
    file = as_file(to_hf(params, config));
    import = std::make_unique<Import>(file, config);
  }
  runtime::CpuAllocator allocator;
  model::GptParams params;
  SafetensorsFile file;
  std::unique_ptr<Import> import;
};

TEST(HfImportRows, LlamaRowsReadAloneAreTheWholeParametersRows) {
  // 4 heads in 2 kv groups, vocab 10 padded to 16 (rows 10..15 are padding).
  model::GptConfig config = model::architecture_defaults(model::Architecture::llama);
  config.num_layers = 2;
  config.hidden_size = 16;
  config.num_attention_heads = 4;
  config.num_query_groups = 2;
  config.ffn_hidden_size = 24;
  config.vocab_size = 10;
  config.make_vocab_size_divisible_by = 16;
  Exported<HfLlamaImport, decltype(&to_hf_llama)> llama(config, &to_hf_llama);
  expect_rows_are_slices(*llama.import, llama.params, config, [](const std::string& name) {
    return !name.ends_with("word_embeddings.weight") && name != "output_layer.weight";
  });
  // The rows past the vocabulary are padding: read as zeros, costing no bytes.
  const int64_t before = llama.import->bytes_read();
  EXPECT_EQ(llama.import->values("output_layer.weight", 12, 4), std::vector<float>(4 * 16, 0.f));
  EXPECT_EQ(llama.import->bytes_read(), before);
}

TEST(HfImportRows, Gpt2RowsReadAloneAreTheWholeParametersRows) {
  model::GptConfig config;
  config.hidden_size = 8;
  config.vocab_size = 10;
  config.make_vocab_size_divisible_by = 4;
  Exported<HfGpt2Import, decltype(&to_hf_gpt2)> gpt2(config, &to_hf_gpt2);
  // The transposed linears and the QKV permutation read their whole tensor, then keep the rows.
  expect_rows_are_slices(*gpt2.import, gpt2.params, config, [](const std::string& name) {
    return name.find("layernorm") != std::string::npos || name.ends_with("proj.bias") ||
           name.ends_with("fc1.bias") || name.ends_with("fc2.bias") ||
           name.find("position_embeddings") != std::string::npos;
  });
}

}  // namespace
}  // namespace trainer
