// Ids to bytes for the table-driven tokenizers, and valid_utf8: each maximal invalid UTF-8
// subpart becomes one U+FFFD (Unicode's "substitution of maximal subparts", as Python and Rust).
#include "trainer/tokenizer/token_bytes.h"

#include "runtime/error.h"
#include "trainer/tokenizer/bpe_tokenizer.h"

namespace trainer::tokenizer {

void TokenBytes::set(int32_t id, std::string bytes) {
  TRAINER_ASSERT(id >= 0, "token id " << id);
  if (static_cast<size_t>(id) >= bytes_.size()) bytes_.resize(static_cast<size_t>(id) + 1);
  bytes_[static_cast<size_t>(id)] = std::move(bytes);
}

bool TokenBytes::has(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < bytes_.size() && bytes_[static_cast<size_t>(id)];
}

std::string TokenBytes::decode(std::span<const int32_t> ids, const std::string& tokenizer) const {
  std::string out;
  for (const int32_t id : ids) {
    if (!has(id)) {
      throw runtime::InputError(
          TRAINER_STR("decode: id " << id << " is no token of the " << tokenizer << " tokenizer"));
    }
    out += *bytes_[static_cast<size_t>(id)];
  }
  return out;
}

TokenBytes byte_level_token_bytes_table(const StringMap<int32_t>& vocab) {
  TokenBytes table;
  std::string bytes;
  for (const auto& [text, id] : vocab) {
    table.set(id, byte_level_token_bytes(text, &bytes) ? bytes : text);
  }
  return table;
}

std::string valid_utf8(std::string_view text) {
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char lead = bytes[i];
    if (lead < 0x80) {
      out += static_cast<char>(lead);
      ++i;
      continue;
    }
    // The sequence's length and the range of its second byte (no overlongs, no surrogates).
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    }
    size_t valid = length == 0 ? 0 : 1;  // bytes of a well-formed prefix
    while (valid > 0 && valid < length && i + valid < text.size()) {
      const unsigned char next = bytes[i + valid];
      const bool fits = valid == 1 ? next >= low && next <= high : next >= 0x80 && next <= 0xBF;
      if (!fits) break;
      ++valid;
    }
    if (length > 0 && valid == length) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += kReplacement;
      i += std::max<size_t>(valid, 1);
    }
  }
  return out;
}

}  // namespace trainer::tokenizer
