// The byte-level BPE tokenizer: its session runs the pre-tokenization steps depth first and
// hands each final piece to the cached merge loop; plus the byte-level map and model building.
// Rules: a piece is never copied unless a step prepends a space to it.
#include "trainer/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>

#include "runtime/error.h"
#include "trainer/tokenizer/sha256.h"

namespace trainer::tokenizer {
namespace {

class BpeTokenizer;

class BpeSession : public TokenizerSession {
 public:
  explicit BpeSession(const BpeTokenizerParts& parts) : parts_(parts), encoder_(parts.model) {
    for (const PreTokenizeStep& step : parts.steps) {
      matchers_.push_back(step.pattern ? std::make_unique<SplitMatcher>(*step.pattern) : nullptr);
    }
    prefixed_.resize(parts.steps.size());
    for (size_t i = 0; i < parts.matched_tokens.size(); ++i) {
      const MatchedToken& token = parts.matched_tokens[i];
      matched_by_first_byte_[token.normalized][static_cast<unsigned char>(token.content[0])]
          .push_back(i);
    }
    for (auto& table : matched_by_first_byte_) {
      for (std::vector<size_t>& candidates : table) {
        std::stable_sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
          return parts.matched_tokens[a].content.size() > parts.matched_tokens[b].content.size();
        });
      }
    }
  }

  // Raw-text added tokens, then normalization, then normalized added tokens, then the steps.
  void encode(std::string_view text, std::vector<int32_t>* ids) override {
    split_by_matched(text, /*normalized=*/false, ids, [&](std::string_view raw) {
      const std::string_view normalized =
          parts_.normalizer ? parts_.normalizer->normalize(raw, &normalized_) : raw;
      split_by_matched(normalized, /*normalized=*/true, ids,
                       [&](std::string_view piece) { run_step(0, piece, ids); });
    });
  }

 private:
  // Emits the ids of the matched tokens of one kind found in text and hands the text between
  // them to on_text, in order.
  template <typename OnText>
  void split_by_matched(std::string_view text, bool normalized, std::vector<int32_t>* ids,
                        OnText&& on_text) {
    const auto& table = matched_by_first_byte_[normalized];
    size_t done = 0;  // text before this is handed out
    for (size_t position = 0; position < text.size(); ++position) {
      for (const size_t candidate : table[static_cast<unsigned char>(text[position])]) {
        const MatchedToken& token = parts_.matched_tokens[candidate];
        if (text.substr(position, token.content.size()) != token.content) continue;
        if (position > done) on_text(text.substr(done, position - done));
        ids->push_back(token.id);
        done = position + token.content.size();
        position = done - 1;
        break;
      }
    }
    if (done < text.size()) on_text(text.substr(done));
  }

 private:
  void run_step(size_t index, std::string_view piece, std::vector<int32_t>* ids) {
    if (piece.empty()) return;
    if (index == parts_.steps.size()) {
      encoder_.encode(piece, ids);
      return;
    }
    const PreTokenizeStep& step = parts_.steps[index];
    if (step.add_prefix_space && piece.front() != ' ') {
      std::string& prefixed = prefixed_[index];  // one buffer per depth: recursion reuses it
      prefixed.assign(1, ' ');
      prefixed.append(piece);
      piece = prefixed;
    }
    if (!matchers_[index]) {
      run_step(index + 1, piece, ids);
      return;
    }
    matchers_[index]->split(piece, step.keep_gaps, [&](std::string_view sub_piece) {
      run_step(index + 1, sub_piece, ids);
    });
  }

  const BpeTokenizerParts& parts_;
  CachedBytePairEncoder encoder_;
  std::vector<std::unique_ptr<SplitMatcher>> matchers_;  // per step; null without a regex
  std::vector<std::string> prefixed_;
  // Indices into parts_.matched_tokens by [normalized][first byte], longest first.
  std::array<std::array<std::vector<size_t>, 256>, 2> matched_by_first_byte_;
  std::string normalized_;  // the normalized form of the current raw segment
};

class BpeTokenizer : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeTokenizerParts parts) : parts_(std::move(parts)) {
    identity_ = parts_.identity;
  }
  std::unique_ptr<TokenizerSession> new_session() const override {
    return std::make_unique<BpeSession>(parts_);
  }
  std::string decode(std::span<const int32_t> ids) const override {
    return parts_.token_bytes.decode(ids, identity_.kind);
  }

 private:
  BpeTokenizerParts parts_;
};

// bytes_to_unicode of GPT-2: '!'..'~', 0xA1..0xAC and 0xAE..0xFF are themselves; the other 68
// bytes take U+0100, U+0101, ... in byte order.
std::array<char32_t, 256> byte_level_characters() {
  std::array<char32_t, 256> characters{};
  char32_t next_shifted = 0x100;
  for (int byte = 0; byte < 256; ++byte) {
    const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                           (byte >= 0xAE && byte <= 0xFF);
    characters[byte] = printable ? static_cast<char32_t>(byte) : next_shifted++;
  }
  return characters;
}

std::string utf8_of(char32_t code_point) {
  std::string text;
  if (code_point < 0x80) {
    text += static_cast<char>(code_point);
  } else {  // the map only reaches U+0143: two bytes suffice
    text += static_cast<char>(0xC0 | (code_point >> 6));
    text += static_cast<char>(0x80 | (code_point & 0x3F));
  }
  return text;
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeTokenizerParts parts) {
  return std::make_unique<BpeTokenizer>(std::move(parts));
}

std::string byte_level_token_text(unsigned char byte) {
  static const std::array<char32_t, 256> characters = byte_level_characters();
  return utf8_of(characters[byte]);
}

bool byte_level_token_bytes(std::string_view token_text, std::string* bytes) {
  static const std::array<int, 0x144> byte_of_character = [] {
    std::array<int, 0x144> table;
    table.fill(-1);
    const std::array<char32_t, 256> characters = byte_level_characters();
    for (int byte = 0; byte < 256; ++byte) table[characters[byte]] = byte;
    return table;
  }();
  bytes->clear();
  for (size_t i = 0; i < token_text.size();) {
    const auto lead = static_cast<unsigned char>(token_text[i]);
    char32_t code_point = 0;
    if (lead < 0x80) {
      code_point = lead;
      i += 1;
    } else if ((lead & 0xE0) == 0xC0 && i + 1 < token_text.size()) {
      code_point = ((lead & 0x1F) << 6) | (static_cast<unsigned char>(token_text[i + 1]) & 0x3F);
      i += 2;
    } else {
      return false;  // three- and four-byte characters are outside the map
    }
    if (code_point >= byte_of_character.size() || byte_of_character[code_point] < 0) return false;
    bytes->push_back(static_cast<char>(byte_of_character[code_point]));
  }
  return true;
}

BytePairModel byte_level_model(const StringMap<int32_t>& vocab,
                               const std::vector<std::pair<std::string, std::string>>& merges,
                               bool whole_pieces, const std::string& file, MergeOrigin origin) {
  BytePairModel model;
  for (int byte = 0; byte < 256; ++byte) {
    const std::string text = byte_level_token_text(static_cast<unsigned char>(byte));
    const auto found = vocab.find(text);
    if (found == vocab.end()) {
      throw runtime::InputError(TRAINER_STR(file << ": the vocabulary has no token \"" << text
                                                 << "\" for byte " << byte
                                                 << " (not a byte-level BPE vocabulary)"));
    }
    model.byte_tokens[byte] = found->second;
  }
  auto id_of = [&](const std::string& text, size_t index) {
    const auto found = vocab.find(text);
    if (found == vocab.end()) {
      throw runtime::InputError(TRAINER_STR(origin(file, index) << ": token \"" << text
                                                                << "\" is not in the vocabulary"));
    }
    return found->second;
  };
  for (size_t index = 0; index < merges.size(); ++index) {
    const auto& [left, right] = merges[index];
    const int32_t left_id = id_of(left, index), right_id = id_of(right, index);
    const int32_t merged = id_of(left + right, index);
    model.merges.assign(left_id, right_id, {static_cast<uint32_t>(index), merged});
  }
  if (whole_pieces) {
    std::string bytes;
    for (const auto& [text, id] : vocab) {
      if (byte_level_token_bytes(text, &bytes)) model.whole_pieces.emplace(bytes, id);
    }
  }
  return model;
}

std::string read_tokenizer_file(const std::string& flag, const std::string& path) {
  if (path.empty())
    throw runtime::InputError(TRAINER_STR("prepare-data: " << flag << " is required"));
  std::ifstream stream(path, std::ios::binary);
  if (!stream) {
    throw runtime::InputError(
        TRAINER_STR("prepare-data: " << flag << " \"" << path << "\": cannot open the file"));
  }
  std::string bytes((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
  if (stream.bad()) {
    throw runtime::InputError(
        TRAINER_STR("prepare-data: " << flag << " \"" << path << "\": read failed"));
  }
  return bytes;
}

TokenizerFileDigest digest_file(const std::string& path) {
  return {path, sha256_hex(read_tokenizer_file("tokenizer file", path))};
}

}  // namespace trainer::tokenizer
