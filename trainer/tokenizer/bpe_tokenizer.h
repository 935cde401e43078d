// A byte-level BPE tokenizer assembled from its parts: pre-tokenization steps (regex splits, the
// ByteLevel step) and the merge model. The gpt2, hf and tiktoken loaders each build one.
// Rules: parts are immutable once built; each session owns its matchers and piece cache.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trainer/tokenizer/byte_pair_encoder.h"
#include "trainer/tokenizer/split_pattern.h"
#include "trainer/tokenizer/token_bytes.h"
#include "trainer/tokenizer/tokenizer.h"
#include "trainer/tokenizer/unicode_normalizer.h"

namespace trainer::tokenizer {

// One pre-tokenization step, applied to every piece the previous step produced.
struct PreTokenizeStep {
  // The regex to split by; null for a ByteLevel step without use_regex.
  std::shared_ptr<const SplitPattern> pattern;
  // Text between matches is a piece too (Hugging Face); tiktoken drops it.
  bool keep_gaps = true;
  // ByteLevel's add_prefix_space: a piece not starting with ' ' gets one prepended.
  bool add_prefix_space = false;
};

// A token matched in the text before pre-tokenization (tokenizer.json's non-special added
// tokens): leftmost match first, the longest one at that position. As in Hugging Face, tokens
// with normalized false are matched in the raw text, then the rest is normalized and the tokens
// with normalized true are matched in that.
struct MatchedToken {
  std::string content;  // non-empty
  int32_t id = 0;
  bool normalized = true;
};

struct BpeTokenizerParts {
  TokenizerIdentity identity;
  std::vector<MatchedToken> matched_tokens;
  std::shared_ptr<const NfcNormalizer> normalizer;  // null: text is not normalized
  std::vector<PreTokenizeStep> steps;
  BytePairModel model;
  TokenBytes token_bytes;  // decoding: each id's bytes (added and special tokens: their text)
};

std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeTokenizerParts parts);

// GPT-2's reversible byte -> character map (printable bytes map to themselves, the others to
// U+0100 onwards): the characters vocab.json and tokenizer.json spell tokens with.
std::string byte_level_token_text(unsigned char byte);  // UTF-8 of the byte's character
// The bytes a byte-level token spells; false when a character is outside the map.
bool byte_level_token_bytes(std::string_view token_text, std::string* bytes);

// How merge i is named in errors ("merges.txt line 7", "tokenizer.json: model.merges[6]").
using MergeOrigin = std::string (*)(const std::string& file, size_t merge_index);

// vocab: token text -> id; merges in rank order. Builds byte_tokens, the merge rules (rank = the
// merge's index) and, when whole_pieces, the whole-piece table. InputError naming the file and
// the merge or byte that is missing.
BytePairModel byte_level_model(const StringMap<int32_t>& vocab,
                               const std::vector<std::pair<std::string, std::string>>& merges,
                               bool whole_pieces, const std::string& file, MergeOrigin origin);

// The SHA-256 of a file, lowercase hex; InputError naming the flag and file when unreadable.
TokenizerFileDigest digest_file(const std::string& path);
// The whole file; InputError "<flag> \"<path>\": ..." when it is missing or unreadable.
std::string read_tokenizer_file(const std::string& flag, const std::string& path);

}  // namespace trainer::tokenizer
