// The rows or columns a tensor-parallel rank asks an HF import for are those of the whole
// parameter, bit for bit, for every transform of both tables (Llama: copy, vocabulary rows with
// padding, q, k and v joined by kv group; GPT-2: copy, vocabulary rows, transposes, the QKV
// permutation), and a split read reads only those rows or columns of the file.
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

// For every parameter, every split of its rows into `parts` (whole kv groups for QKV) and every
// split of a matrix's columns, the block read alone equals that block of the whole parameter; a
// block of rows of an `alone` parameter, and a block of columns of any but the vocabulary, cost
// the bytes of the block only.
void expect_blocks_are_slices(HfImport& import, const model::GptParams& params,
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
        const std::vector<float> got =
            import.values(p.name, {.first_row = part * each, .rows = each});
        ASSERT_EQ(got, std::vector<float>(whole.begin() + part * each * row,
                                          whole.begin() + (part + 1) * each * row))
            << "rows, part " << part << " of " << parts;
        if (alone(p.name)) {
          EXPECT_EQ(import.bytes_read() - before, 4 * each * row) << "read beyond its rows";
        }
      }
    }
    if (p.global_shape.size() != 2) continue;
    for (int64_t parts : {2, 4}) {
      if (row % parts != 0) continue;
      const int64_t each = row / parts;
      for (int64_t part = 0; part < parts; ++part) {
        const int64_t before = import.bytes_read();
        const std::vector<float> got =
            import.values(p.name, {.first_col = part * each, .cols = each});
        std::vector<float> expected;
        for (int64_t r = 0; r < rows; ++r)
          expected.insert(expected.end(), whole.begin() + r * row + part * each,
                          whole.begin() + r * row + (part + 1) * each);
        ASSERT_EQ(got, expected) << "columns, part " << part << " of " << parts;
        if (!p.roles.vocab_padded) {
          EXPECT_EQ(import.bytes_read() - before, 4 * rows * each) << "read beyond its columns";
        }
      }
    }
  }
}

// read_into in pieces of `piece_values` gives what values() gives, for the whole of every
// parameter and its halves by rows (one of two kv groups of Llama's QKV) and by columns.
void expect_pieces_are_values(HfImport& import, const model::GptParams& params,
                              int64_t piece_values) {
  for (const model::NamedParam& p : params.named) {
    SCOPED_TRACE(p.name);
    const int64_t rows = p.global_shape[0], cols = p.tensor.numel() / rows;
    std::vector<HfBlock> blocks = {{}};
    if (rows % 2 == 0) blocks.push_back({.first_row = rows / 2, .rows = rows / 2});
    if (p.global_shape.size() == 2 && cols % 2 == 0)
      blocks.push_back({.first_col = cols / 2, .cols = cols / 2});
    for (const HfBlock& block : blocks) {
      const std::vector<float> expected = import.values(p.name, block);
      std::vector<float> got(expected.size(), -1.f);
      import.read_into(p.name, block, got, piece_values);
      EXPECT_EQ(got, expected) << "rows from " << block.first_row << ", columns from "
                               << block.first_col;
    }
  }
}

// The model of `config` with init_params' values, exported by `sources` and opened as `Import`.
template <typename Import, typename Sources>
struct Exported {
  Exported(const model::GptConfig& config, Sources sources)
      : params(model::GptParams::allocate(allocator, config, runtime::MemoryCategory::param)) {
    model::init_params(params, config, 11);
    file = as_file(hf_entries(sources(params, config), params));
    import = std::make_unique<Import>(file, config);
  }
  runtime::CpuAllocator allocator;
  model::GptParams params;
  SafetensorsFile file;
  std::unique_ptr<Import> import;
};

TEST(HfImportBlocks, LlamaBlocksReadAloneAreTheWholeParametersBlocks) {
  // 4 heads in 2 kv groups, vocab 10 padded to 16 (rows 10..15 are padding); Qwen2's q, k and v
  // biases split with their groups.
  model::GptConfig config = model::architecture_defaults(model::Architecture::llama);
  config.num_layers = 2;
  config.hidden_size = 16;
  config.num_attention_heads = 4;
  config.num_query_groups = 2;
  config.ffn_hidden_size = 24;
  config.vocab_size = 10;
  config.make_vocab_size_divisible_by = 16;
  config.add_qkv_bias = true;
  Exported<HfLlamaImport, decltype(&hf_llama_sources)> llama(config, &hf_llama_sources);
  expect_blocks_are_slices(*llama.import, llama.params, config, [](const std::string& name) {
    return !name.ends_with("word_embeddings.weight") && name != "output_layer.weight";
  });
  expect_pieces_are_values(*llama.import, llama.params, 7);
  // The rows past the vocabulary are padding: read as zeros, costing no bytes.
  const int64_t before = llama.import->bytes_read();
  EXPECT_EQ(llama.import->values("output_layer.weight", {.first_row = 12, .rows = 4}),
            std::vector<float>(4 * 16, 0.f));
  EXPECT_EQ(llama.import->bytes_read(), before);
}

TEST(HfImportBlocks, Gpt2BlocksReadAloneAreTheWholeParametersBlocks) {
  model::GptConfig config;
  config.hidden_size = 8;
  config.vocab_size = 10;
  config.make_vocab_size_divisible_by = 4;
  Exported<HfGpt2Import, decltype(&hf_gpt2_sources)> gpt2(config, &hf_gpt2_sources);
  // The QKV permutation reads every column of its rows (its weight's and its bias's).
  expect_blocks_are_slices(*gpt2.import, gpt2.params, config, [](const std::string& name) {
    return name.find("linear_qkv") == std::string::npos &&
           name.find("word_embeddings") == std::string::npos;
  });
  expect_pieces_are_values(*gpt2.import, gpt2.params, 5);
}

}  // namespace
}  // namespace trainer
