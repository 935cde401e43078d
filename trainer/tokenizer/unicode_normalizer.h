// Unicode normalization of tokenizer.json's `normalizer` (type NFC, as Qwen2's tokenizers use)
// through utf8proc (Debian libutf8proc-dev: small, Unicode 15 data; ICU would carry 30 MB of data
// into every bundle of the trainer). Rules: stateless, so any thread may call it; text must be
// valid UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace trainer::tokenizer {

class NfcNormalizer {
 public:
  // Returns text itself when it is ASCII (NFC already), else its NFC form, kept in *storage.
  std::string_view normalize(std::string_view text, std::string* storage) const;
};

}  // namespace trainer::tokenizer
