// The tensors of a Hugging Face checkpoint as an import reads them: each one found by name,
// checked against the shape the config needs and for a float dtype from its header entry alone,
// and read only when its values are asked for, so that a rank reads the tensors of its own
// parameters and no more. What no parameter asked for is an error, as a layer the config lacks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/gpt_params.h"
#include "trainer/export/safetensors.h"

namespace trainer {

// A block of a tensor: rows [first_row, first_row + rows) of columns [first_col, first_col +
// cols); -1: to the end. A 1-D tensor is one column of rows.
struct HfBlock {
  int64_t first_row = 0;
  int64_t rows = -1;
  int64_t first_col = 0;
  int64_t cols = -1;
};

class HfTensors {
 public:
  // Names are looked up as prefix + name, for each of `prefixes` in turn ("transformer." then ""
  // for GPT-2's two spellings). `file` must outlive this.
  explicit HfTensors(const SafetensorsFile& file, std::vector<std::string> prefixes = {""});

  // The tensor `name` must be there, with `shape`, or with `min_rows` >= 0 at least that many
  // rows of shape[1] columns (a larger vocabulary), and dtype F32, BF16 or F16. It counts as used.
  // InputError naming the tensor otherwise.
  void check(const std::string& name, const std::vector<int64_t>& shape, int64_t min_rows = -1);

  // A block of a checked tensor as f32 (row after row), read alone from its file after a
  // header-only read.
  std::vector<float> values(const std::string& name, HfBlock block = {});

  // A block of a checked vocabulary matrix as the model pads it (rows and cols set): the file's
  // rows below `vocab` (a larger file's extra rows dropped), zeros from `vocab` on.
  std::vector<float> vocab_rows(const std::string& name, int64_t vocab, HfBlock block);

  // InputError naming the first tensor no check() used, unless `ignored(name)`.
  void check_all_used(const std::function<bool(const std::string&)>& ignored) const;

  int64_t bytes_read() const { return bytes_read_; }  // the tensors values() read, in file bytes

 private:
  const SafetensorsEntry& find(const std::string& name) const;

  const SafetensorsFile& file_;
  std::vector<std::string> prefixes_;
  std::set<std::string> used_;
  int64_t bytes_read_ = 0;
};

// How a parameter is made from Hugging Face tensors, in both families' tables.
enum class HfTransform {
  copy,         // the same values
  vocab_rows,   // the first vocab_size rows; padding rows 0
  transpose,    // GPT-2's Conv1D [in, out] -> (out, in)
  qkv_columns,  // GPT-2's c_attn q | k | v columns -> per-head (head, {q,k,v}, D) rows; its bias
  split_qkv,    // Llama's q_proj, k_proj and v_proj ("{qkv}" in the name) joined by kv group
};

// Takes a tensor's f32 values in order, in pieces of any size.
using HfValueSink = std::function<void(const float* values, int64_t count)>;

// One tensor of an export: its HF name and shape, the whole-model parameter it is made from
// (`param`: its index in GptParams::named of the whole model), and `write`, which gives a sink its
// values from that parameter's (`values`, f32, its global shape) when the export reaches it:
// straight from them where the tensor is a copy (a range of them), from one transposed or
// permuted copy otherwise. So an export holds at most one tensor beyond the parameters it reads.
struct HfSource {
  std::string name;
  std::vector<int64_t> shape;
  int64_t param = -1;
  std::function<void(const float* values, const HfValueSink& sink)> write;
};

// The source of the tensor `hf` made from parameter `param` (of global `shape`) by a transform
// every family shares: copy (the values as they are) or vocab_rows (the rows below `vocab_size`,
// the padding dropped). The families' own transforms make their own sources.
HfSource hf_shared_source(HfTransform transform, std::string hf, const runtime::Shape& shape,
                          int64_t param, int64_t vocab_size);

// The sources' tensors made from `params` (the whole model, host f32), F32, all at once (tests
// read an export in memory this way; the export itself writes them one at a time).
std::vector<SafetensorsEntry> hf_entries(const std::vector<HfSource>& sources,
                                         const model::GptParams& params);

// One row of a family's table: a parameter name ("{i}" for the layer index), its HF tensor.
struct HfRule {
  const char* ours;
  const char* hf;
  HfTransform transform;
};

// A checkpoint checked against a whole model when opened (every parameter's tensors there with
// their shapes, nothing left over), then read one parameter at a time, by a family's table. The
// base does copy and vocab_rows; a family (HfGpt2Import, HfLlamaImport) its own transforms, and
// its constructor ends with check_tensors().
class HfImport {
 public:
  virtual ~HfImport() = default;
  // The parameter `name` of the whole model, in its global shape, f32; vocabulary padding rows 0.
  // `block`: only those rows or columns, as a tensor-parallel rank holds them, read alone from
  // the file (a rank's kv groups of q, k and v, its gate or up rows, its part of the vocabulary;
  // its columns of o_proj or down_proj; GPT-2's transposed rows and columns), but for GPT-2's
  // QKV permutation, whose rows of a block read every column of the file's rows.
  std::vector<float> values(const std::string& name, HfBlock block = {});
  // values() of `block` written to `out` (its rows x cols, row after row), read in pieces of at
  // most `piece_values` values where the transform keeps rows apart (copy, vocab_rows: the
  // embeddings, the head, the MLP), so that beyond `out` a reader holds one piece of a large
  // tensor at a time, not the whole of it in f32 and in its stored dtype.
  void read_into(const std::string& name, HfBlock block, std::span<float> out,
                 int64_t piece_values = int64_t{1} << 22);
  int64_t bytes_read() const { return tensors_.bytes_read(); }  // file bytes read so far
  int64_t stored_bytes() const;  // the bytes of every tensor the file holds

 protected:
  // The import keeps `file` (a header-only read holds no tensor bytes); `prefixes` as HfTensors
  // takes them; `rules`: the family's table (outlives this).
  HfImport(SafetensorsFile file, const model::GptConfig& config, std::vector<std::string> prefixes,
           const std::vector<HfRule>& rules);
  // Checks every parameter's tensors (the family's transforms through check_transformed), then
  // that the file holds no other tensor but `ignored` ones. InputError naming the tensor.
  void check_tensors(const std::function<bool(const std::string&)>& ignored);
  // The family's transforms: check the tensors of parameter shape `shape` made by `rule` from
  // `hf` (the HF name, layer index in place); its `block` (every field set, in range; a 1-D
  // parameter's block is its one column).
  virtual void check_transformed(const HfRule& rule, const std::string& hf,
                                 const runtime::Shape& shape) = 0;
  virtual std::vector<float> transformed(const HfRule& rule, const std::string& hf,
                                         const runtime::Shape& shape, const HfBlock& block) = 0;

  model::GptConfig config_;

 private:
  // The rule of parameter `name` and its HF name.
  std::pair<const HfRule*, std::string> rule_of(const std::string& name) const;
  // The global shape of parameter `name`.
  const runtime::Shape& shape_of(const std::string& name) const;

  const std::vector<HfRule>& rules_;
  SafetensorsFile file_;  // before tensors_, which refers to it

 protected:
  HfTensors tensors_;

 private:
  model::WholeModelLayout whole_;
  std::map<std::string, size_t> index_;  // name -> its entry of whole_.named()
};

// A parameter's name as the import tables write it, "layers.{i}." for any layer, and the layer
// index it names ("" outside layers).
std::pair<std::string, std::string> hf_name_pattern(const std::string& name);

// The rule of `rules` (each with a `const char* ours` pattern) that names the parameter `name`,
// or nullptr, and the layer index the name holds.
template <typename Rule>
std::pair<const Rule*, std::string> hf_rule_of(const std::vector<Rule>& rules,
                                               const std::string& name) {
  const auto [pattern, layer] = hf_name_pattern(name);
  for (const Rule& rule : rules)
    if (pattern == rule.ours) return {&rule, layer};
  return {nullptr, layer};
}

// `text` with its first `key` replaced by `value`.
std::string hf_replaced(std::string text, const std::string& key, const std::string& value);

// Fills `params` (the whole model, host f32) from `import`, one parameter at a time (a defect of
// the checkpoint was found when `import` was opened, before any parameter was written).
void import_whole(HfImport& import, const model::GptParams& params);

}  // namespace trainer
