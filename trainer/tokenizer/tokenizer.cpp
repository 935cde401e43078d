// Tokenizer kinds by name, the byte tokenizer, and load_tokenizer's dispatch to the loaders.
// Rules: the byte tokenizer is today's prepare-data: each byte its own id, eod 256.
#include "trainer/tokenizer/tokenizer.h"

#include "runtime/error.h"
#include "trainer/tokenizer/tokenizer_loaders.h"

namespace trainer::tokenizer {
namespace {

constexpr int32_t kByteEndOfDocument = 256;

class ByteSession : public TokenizerSession {
 public:
  void encode(std::string_view text, std::vector<int32_t>* ids) override {
    for (const char byte : text) ids->push_back(static_cast<unsigned char>(byte));
  }
};

class ByteTokenizer : public Tokenizer {
 public:
  explicit ByteTokenizer(const TokenizerSpec& spec) {
    identity_.kind = "byte";
    identity_.eod_id = spec.eod_id.value_or(kByteEndOfDocument);
    identity_.vocab_size = std::max<int64_t>(256, *identity_.eod_id + 1);
  }
  std::unique_ptr<TokenizerSession> new_session() const override {
    return std::make_unique<ByteSession>();
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string bytes;
    for (const int32_t id : ids) {
      if (id >= 0 && id < 256) {
        bytes += static_cast<char>(id);
      } else if (id == identity_.eod_id) {
        bytes += kEndOfTextName;
      } else {
        throw runtime::InputError(
            TRAINER_STR("decode: id " << id << " is no token of the byte tokenizer"));
      }
    }
    return bytes;
  }
};

}  // namespace

const char* kind_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::byte:
      return "byte";
    case TokenizerKind::gpt2:
      return "gpt2";
    case TokenizerKind::hf:
      return "hf";
    case TokenizerKind::tiktoken:
      return "tiktoken";
    case TokenizerKind::sentencepiece:
      return "sentencepiece";
  }
  return "unknown";
}

TokenizerKind parse_kind(const std::string& name) {
  for (const TokenizerKind kind : {TokenizerKind::byte, TokenizerKind::gpt2, TokenizerKind::hf,
                                   TokenizerKind::tiktoken, TokenizerKind::sentencepiece}) {
    if (name == kind_name(kind)) return kind;
  }
  throw runtime::InputError(
      TRAINER_STR("prepare-data: --tokenizer \"" << name << "\": expected one of " << kKindNames));
}

std::unique_ptr<Tokenizer> load_tokenizer(const TokenizerSpec& spec) {
  switch (spec.kind) {
    case TokenizerKind::byte:
      return std::make_unique<ByteTokenizer>(spec);
    case TokenizerKind::gpt2:
      return load_gpt2_tokenizer(spec);
    case TokenizerKind::hf:
      return load_hf_tokenizer(spec);
    case TokenizerKind::tiktoken:
      return load_tiktoken_tokenizer(spec);
    case TokenizerKind::sentencepiece:
      return load_sentencepiece_tokenizer(spec);
  }
  throw runtime::InputError("prepare-data: unknown tokenizer kind");
}

}  // namespace trainer::tokenizer
