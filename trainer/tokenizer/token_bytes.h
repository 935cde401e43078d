// Decoding of the table-driven tokenizers (byte-level BPE, tiktoken): the bytes of each id, and
// the lossy UTF-8 text of decoded bytes. Rules: an id without an entry is an error, never skipped.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "trainer/tokenizer/byte_pair_encoder.h"

namespace trainer::tokenizer {

// id -> the bytes the token spells; no value for an id that is no token.
class TokenBytes {
 public:
  void set(int32_t id, std::string bytes);
  bool has(int32_t id) const;
  // The concatenated bytes of ids; InputError naming the first id without an entry.
  std::string decode(std::span<const int32_t> ids, const std::string& tokenizer) const;

 private:
  std::vector<std::optional<std::string>> bytes_;
};

// The bytes of each token of a byte-level vocabulary (token text spelled with GPT-2's byte
// characters); a token outside that alphabet decodes as its text.
TokenBytes byte_level_token_bytes_table(const StringMap<int32_t>& vocab);

}  // namespace trainer::tokenizer
