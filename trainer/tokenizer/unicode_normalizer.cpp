// NfcNormalizer: utf8proc_map with STABLE | COMPOSE (canonical decomposition, then canonical
// composition: NFC). Rules: ASCII text skips utf8proc; utf8proc's buffer is freed at once.
#include "trainer/tokenizer/unicode_normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "runtime/error.h"

namespace trainer::tokenizer {

std::string_view NfcNormalizer::normalize(std::string_view text, std::string* storage) const {
  bool ascii = true;
  for (const char c : text) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) return text;
  utf8proc_uint8_t* normalized = nullptr;
  const utf8proc_ssize_t size =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &normalized,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (size < 0) {
    throw runtime::InputError(TRAINER_STR("NFC normalization failed: " << utf8proc_errmsg(size)));
  }
  storage->assign(reinterpret_cast<const char*>(normalized), static_cast<size_t>(size));
  std::free(normalized);
  return *storage;
}

}  // namespace trainer::tokenizer
