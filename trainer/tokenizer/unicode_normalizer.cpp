// NfcNormalizer: ICU's Normalizer2 NFC instance with its UTF-8 entry points (no UTF-16 copy);
// ASCII text is NFC already and skips ICU entirely.
#include "trainer/tokenizer/unicode_normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include "runtime/error.h"

namespace trainer::tokenizer {
namespace {

const icu::Normalizer2& icu_normalizer(const void* normalizer) {
  return *static_cast<const icu::Normalizer2*>(normalizer);
}

bool is_ascii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

NfcNormalizer::NfcNormalizer() {
  UErrorCode status = U_ZERO_ERROR;
  normalizer_ = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status) || normalizer_ == nullptr) {
    throw runtime::LibraryError(TRAINER_STR("ICU: no NFC normalizer: " << u_errorName(status)));
  }
}

std::string_view NfcNormalizer::normalize(std::string_view text, std::string* storage) const {
  if (is_ascii(text)) return text;
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  UErrorCode status = U_ZERO_ERROR;
  if (icu_normalizer(normalizer_).isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return text;
  storage->clear();
  icu::StringByteSink<std::string> sink(storage);
  status = U_ZERO_ERROR;
  icu_normalizer(normalizer_).normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) {
    throw runtime::LibraryError(
        TRAINER_STR("ICU: NFC normalization failed: " << u_errorName(status)));
  }
  return *storage;
}

}  // namespace trainer::tokenizer
