// SHA-256 (FIPS 180-4) of a byte string, for <prefix>.json's tokenizer file digests.
// Rules: one call per file; 64 lowercase hex digits out.
#pragma once

#include <string>
#include <string_view>

namespace trainer::tokenizer {

std::string sha256_hex(std::string_view bytes);

}  // namespace trainer::tokenizer
