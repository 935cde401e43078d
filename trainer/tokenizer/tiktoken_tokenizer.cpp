// The tiktoken tokenizer: a .tiktoken ranks file (base64 token, space, rank per line) and a
// named split pattern. Rules: the rank of a merged pair is the rank of the token it makes (every
// split of every token into two tokens is a rule), pieces that are tokens are looked up whole.
#include <algorithm>
#include <array>
#include <charconv>

#include "runtime/error.h"
#include "trainer/tokenizer/bpe_tokenizer.h"
#include "trainer/tokenizer/tokenizer_loaders.h"

namespace trainer::tokenizer {
namespace {

// Standard base64 with padding; false on any other character or a bad length.
bool decode_base64(std::string_view text, std::string* bytes) {
  static const std::array<int8_t, 256> value_of = [] {
    std::array<int8_t, 256> table;
    table.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i)
      table[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
    return table;
  }();
  bytes->clear();
  if (text.empty() || text.size() % 4 != 0) return false;
  size_t padding = 0;
  while (padding < 2 && text[text.size() - 1 - padding] == '=') ++padding;
  const size_t data_chars = text.size() - padding;
  uint32_t accumulator = 0;
  int bits = 0;
  for (size_t i = 0; i < data_chars; ++i) {
    const int8_t value = value_of[static_cast<unsigned char>(text[i])];
    if (value < 0) return false;
    accumulator = (accumulator << 6) | static_cast<uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes->push_back(static_cast<char>((accumulator >> bits) & 0xFF));
    }
  }
  return !bytes->empty();
}

}  // namespace

std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const TokenizerSpec& spec) {
  const std::string& path = spec.tokenizer_file;
  const std::string text = read_tokenizer_file("--tokenizer-file", path);
  if (spec.split_pattern.empty()) {
    throw runtime::InputError(TRAINER_STR(
        "prepare-data: --tokenizer tiktoken needs --split-pattern (" << kSplitPatternNames << ")"));
  }
  if (!spec.eod_id) {
    throw runtime::InputError(
        "prepare-data: --tokenizer tiktoken needs --eod-id (a .tiktoken file names no special "
        "tokens; cl100k_base uses 100257, o200k_base 199999)");
  }
  BpeTokenizerParts parts;
  BytePairModel& model = parts.model;
  std::vector<std::pair<std::string, int32_t>> tokens;  // bytes, rank
  model.whole_pieces.reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  std::string bytes;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t stop = text.find('\n', start);
    if (stop == std::string::npos) stop = text.size();
    const std::string_view line(text.data() + start, stop - start);
    start = stop + 1;
    ++line_number;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    int64_t rank = -1;
    const std::string_view rank_text =
        space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    const auto [end, error] =
        std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    if (space == std::string_view::npos || !decode_base64(line.substr(0, space), &bytes) ||
        error != std::errc() || end != rank_text.data() + rank_text.size() || rank < 0 ||
        rank > INT32_MAX) {
      throw runtime::InputError(
          TRAINER_STR(path << " line " << line_number << ": \"" << line.substr(0, 80)
                           << "\": expected a base64 token, a space and a rank"));
    }
    if (!model.whole_pieces.emplace(bytes, static_cast<int32_t>(rank)).second) {
      throw runtime::InputError(TRAINER_STR(path << " line " << line_number << ": token \""
                                                 << line.substr(0, space) << "\" appears twice"));
    }
    tokens.emplace_back(bytes, static_cast<int32_t>(rank));
    parts.token_bytes.set(static_cast<int32_t>(rank), bytes);
  }
  for (int byte = 0; byte < 256; ++byte) {
    const auto found = model.whole_pieces.find(std::string(1, static_cast<char>(byte)));
    if (found == model.whole_pieces.end()) {
      throw runtime::InputError(TRAINER_STR(path << ": no token for the single byte " << byte
                                                 << " (every byte needs a rank)"));
    }
    model.byte_tokens[byte] = found->second;
  }
  int64_t max_rank = 0;
  for (const auto& [token, rank] : tokens) {
    max_rank = std::max<int64_t>(max_rank, rank);
    if (rank == *spec.eod_id) {
      throw runtime::InputError(TRAINER_STR("prepare-data: --eod-id "
                                            << *spec.eod_id << " is the rank of a "
                                            << "mergeable token of " << path));
    }
    for (size_t split = 1; split < token.size(); ++split) {
      const auto left = model.whole_pieces.find(std::string_view(token).substr(0, split));
      const auto right = model.whole_pieces.find(std::string_view(token).substr(split));
      if (left != model.whole_pieces.end() && right != model.whole_pieces.end()) {
        model.merges.assign(left->second, right->second, {static_cast<uint32_t>(rank), rank});
      }
    }
  }
  const std::string pattern = named_split_pattern(spec.split_pattern);
  parts.steps.push_back(
      {std::make_shared<SplitPattern>(pattern, "--split-pattern " + spec.split_pattern), false,
       false});
  TokenizerIdentity& identity = parts.identity;
  identity.kind = "tiktoken";
  identity.files = {digest_file(path)};
  identity.split_pattern = pattern;
  identity.eod_id = spec.eod_id;
  identity.vocab_size = std::max<int64_t>(max_rank, *spec.eod_id) + 1;
  parts.token_bytes.set(*spec.eod_id, kEndOfTextName);  // tiktoken's name of the eod
  return make_bpe_tokenizer(std::move(parts));
}

}  // namespace trainer::tokenizer
