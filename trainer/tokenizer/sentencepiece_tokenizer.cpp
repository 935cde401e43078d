// The sentencepiece tokenizer: a .model through Google's library (Debian libsentencepiece-dev);
// its eos id ends documents. Rules: the processor is loaded once and shared, its Encode is const
// and thread-safe, so a session holds only a reference.
#include <sentencepiece_processor.h>

#include "runtime/error.h"
#include "trainer/tokenizer/bpe_tokenizer.h"
#include "trainer/tokenizer/tokenizer_loaders.h"

namespace trainer::tokenizer {
namespace {

class SentencePieceSession : public TokenizerSession {
 public:
  SentencePieceSession(const sentencepiece::SentencePieceProcessor& processor, std::string path)
      : processor_(processor), path_(std::move(path)) {}
  void encode(std::string_view text, std::vector<int32_t>* ids) override {
    const auto status = processor_.Encode(text, &scratch_);
    if (!status.ok()) {
      throw runtime::InputError(
          TRAINER_STR(path_ << ": SentencePiece cannot encode a document: " << status.ToString()));
    }
    ids->insert(ids->end(), scratch_.begin(), scratch_.end());
  }

 private:
  const sentencepiece::SentencePieceProcessor& processor_;
  std::string path_;
  std::vector<int> scratch_;
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const TokenizerSpec& spec) : path_(spec.tokenizer_file) {
    const std::string bytes = read_tokenizer_file("--tokenizer-file", path_);
    const auto status = processor_.LoadFromSerializedProto(bytes);
    if (!status.ok()) {
      throw runtime::InputError(
          TRAINER_STR(path_ << ": not a SentencePiece model: " << status.ToString()));
    }
    identity_.kind = "sentencepiece";
    identity_.files = {digest_file(path_)};
    identity_.vocab_size = processor_.GetPieceSize();
    identity_.eod_id = spec.eod_id;
    if (!identity_.eod_id && processor_.eos_id() >= 0) identity_.eod_id = processor_.eos_id();
    if (identity_.eod_id) {
      identity_.vocab_size = std::max<int64_t>(identity_.vocab_size, *identity_.eod_id + 1);
    }
  }
  std::unique_ptr<TokenizerSession> new_session() const override {
    return std::make_unique<SentencePieceSession>(processor_, path_);
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::vector<int> pieces;
    for (const int32_t id : ids) {
      if (id < 0 || id >= processor_.GetPieceSize()) {
        throw runtime::InputError(TRAINER_STR("decode: id " << id << " is no piece of " << path_
                                                            << " (" << processor_.GetPieceSize()
                                                            << " pieces)"));
      }
      pieces.push_back(id);
    }
    std::string text;
    const auto status = processor_.Decode(pieces, &text);
    if (!status.ok()) {
      throw runtime::InputError(
          TRAINER_STR(path_ << ": SentencePiece cannot decode: " << status.ToString()));
    }
    return text;
  }

 private:
  std::string path_;
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece_tokenizer(const TokenizerSpec& spec) {
  return std::make_unique<SentencePieceTokenizer>(spec);
}

}  // namespace trainer::tokenizer
