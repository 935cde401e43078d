// Unicode normalization of tokenizer.json's `normalizer` (type NFC, as Qwen2's tokenizers use)
// through ICU, straight on UTF-8. Rules: shared read-only by every thread (ICU's normalizer
// instances are immutable singletons); text must be valid UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace trainer::tokenizer {

class NfcNormalizer {
 public:
  NfcNormalizer();  // LibraryError when ICU has no NFC data
  // Returns text itself when it is already NFC, else the NFC form (kept in *storage).
  std::string_view normalize(std::string_view text, std::string* storage) const;

 private:
  const void* normalizer_;  // const icu::Normalizer2*
};

}  // namespace trainer::tokenizer
