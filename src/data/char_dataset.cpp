// CharVocabulary and CharDataset: characters (bytes) to token ids, and next-token windows.
#include <algorithm>
#include <array>

#include "ember/char_data.h"
#include "ember/errors.h"
#include "ember/factories.h"

namespace ember::data {

CharVocabulary::CharVocabulary(std::string_view text) {
  EMBER_CHECK(!text.empty(), ValueError, "CharVocabulary: the text is empty");
  std::array<bool, 256> present{};
  for (char c : text) present[static_cast<unsigned char>(c)] = true;
  for (int b = 0; b < 256; ++b) {
    if (present[static_cast<size_t>(b)]) chars_ += static_cast<char>(b);
  }
  *this = from_chars(chars_);
}

CharVocabulary CharVocabulary::from_chars(std::string_view chars) {
  EMBER_CHECK(!chars.empty(), ValueError, "CharVocabulary: no characters");
  CharVocabulary v;
  v.chars_ = std::string(chars);
  v.token_of_.assign(256, -1);
  for (size_t i = 0; i < chars.size(); ++i) {
    auto& slot = v.token_of_[static_cast<unsigned char>(chars[i])];
    EMBER_CHECK(slot < 0, ValueError, "CharVocabulary: character ",
                static_cast<int>(static_cast<unsigned char>(chars[i])), " appears twice");
    slot = static_cast<int16_t>(i);
  }
  return v;
}

int64_t CharVocabulary::token(char c) const {
  const int16_t t = token_of_[static_cast<unsigned char>(c)];
  EMBER_CHECK(t >= 0, ValueError, "CharVocabulary: character ", static_cast<int>(static_cast<unsigned char>(c)),
              " is not in the vocabulary of ", size(), " characters");
  return t;
}

Tensor CharVocabulary::encode(std::string_view text) const {
  Tensor out = empty({static_cast<int64_t>(text.size())}, kInt64);
  int64_t* ids = out.data_ptr<int64_t>();
  for (size_t i = 0; i < text.size(); ++i) ids[i] = token(text[i]);
  return out;
}

std::string CharVocabulary::decode(const Tensor& tokens) const {
  EMBER_CHECK(tokens.dtype() == kInt64, TypeError, "CharVocabulary::decode: expected int64 token ids, got ",
              tokens.dtype());
  std::string out;
  for (int64_t t : tokens.to_vector<int64_t>()) {
    EMBER_CHECK(t >= 0 && t < size(), IndexError, "CharVocabulary::decode: token ", t, " is out of range for ", size(),
                " characters");
    out += chars_[static_cast<size_t>(t)];
  }
  return out;
}

CharDataset::CharDataset(Tensor tokens, int64_t context) : tokens_(std::move(tokens)), context_(context) {
  EMBER_CHECK(tokens_.defined() && tokens_.dim() == 1 && tokens_.dtype() == kInt64 && tokens_.device().is_cpu(),
              ValueError, "CharDataset: expected a 1-D int64 cpu tensor of token ids");
  EMBER_CHECK(context_ >= 1, ValueError, "CharDataset: context must be at least 1, got ", context_);
  EMBER_CHECK(tokens_.numel() > context_, ValueError, "CharDataset: a context of ", context_,
              " tokens needs a text of at least ", context_ + 1, " tokens, but the text has ", tokens_.numel());
  tokens_ = tokens_.contiguous();
}

size_t CharDataset::size() const { return static_cast<size_t>(tokens_.numel() - context_); }

Example CharDataset::get(size_t index) const {
  EMBER_CHECK(index < size(), IndexError, "index ", index, " is out of bounds for dimension 0 with size ", size());
  const auto i = static_cast<int64_t>(index);
  return {tokens_.slice(0, i, i + context_), tokens_.slice(0, i + 1, i + context_ + 1)};
}

}  // namespace ember::data
