// The tokenizers of `trainer prepare-data`: byte, gpt2 (vocab.json + merges.txt), hf
// (tokenizer.json, byte-level BPE), tiktoken (.tiktoken ranks + a named split) and sentencepiece.
// Rules: text in, ids out; special-token text is plain text (only the caller appends the eod id).
// Decoding is the inverse: ids to the bytes they spell (special tokens to their text).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trainer::tokenizer {

enum class TokenizerKind { byte, gpt2, hf, tiktoken, sentencepiece };

// The kind's flag value ("byte", "gpt2", ...), and back (InputError listing the kinds).
const char* kind_name(TokenizerKind kind);
TokenizerKind parse_kind(const std::string& name);
inline constexpr const char* kKindNames = "byte, gpt2, hf, tiktoken, sentencepiece";

// What to load, as the prepare-data flags give it.
struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::byte;
  std::string vocab_file;         // gpt2: vocab.json (encoder.json)
  std::string merge_file;         // gpt2: merges.txt (vocab.bpe)
  std::string tokenizer_file;     // hf: tokenizer.json; tiktoken: .tiktoken; sentencepiece: .model
  std::string split_pattern;      // tiktoken: a named split (split_pattern.h)
  std::optional<int32_t> eod_id;  // overrides the tokenizer's own end-of-document id
};

struct TokenizerFileDigest {
  std::string path;
  std::string sha256;  // lowercase hex
};

// Written to <prefix>.json so a dataset names the tokenizer that made it.
struct TokenizerIdentity {
  std::string kind;
  std::vector<TokenizerFileDigest> files;
  int64_t vocab_size = 0;         // ids are < vocab_size (the eod id included)
  std::optional<int32_t> eod_id;  // none when the tokenizer has no end-of-document token
  std::string split_pattern;      // the pre-tokenization regex; empty when there is none
};

// One thread's encoder: owns its caches and regex match state.
class TokenizerSession {
 public:
  virtual ~TokenizerSession() = default;
  // Appends the ids of text. Byte-level tokenizers need valid UTF-8 (requires_utf8()).
  virtual void encode(std::string_view text, std::vector<int32_t>* ids) = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::unique_ptr<TokenizerSession> new_session() const = 0;
  // The bytes `ids` spell, as the reference decoders give them: a byte-level token (added and
  // special ones too, as Hugging Face's ByteLevel decoder) its bytes, or its text when it has a
  // character outside GPT-2's byte alphabet; tiktoken's ranks their bytes; the eod id of a
  // tokenizer without a name for it (byte, tiktoken) "<|endoftext|>"; SentencePiece its
  // library's Decode. May end inside a UTF-8 character (valid_utf8 makes text of it).
  // InputError naming an id with no token.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  const TokenizerIdentity& identity() const { return identity_; }
  // Whether documents must be valid UTF-8 (every kind but byte).
  bool requires_utf8() const { return identity_.kind != "byte"; }

 protected:
  TokenizerIdentity identity_;
};

// The text "<|endoftext|>": what an eod id decodes to when the tokenizer has no text for it.
inline constexpr const char* kEndOfTextName = "<|endoftext|>";

// `bytes` with each invalid UTF-8 sequence replaced by U+FFFD, as Python's
// bytes.decode("utf-8", errors="replace") and Rust's from_utf8_lossy do.
std::string valid_utf8(std::string_view bytes);

// Loads and validates the tokenizer files; every defect is an InputError naming the file and,
// inside it, the field or line.
std::unique_ptr<Tokenizer> load_tokenizer(const TokenizerSpec& spec);

}  // namespace trainer::tokenizer
