// ember::data, character-level text: a vocabulary, fixed-length windows over encoded text,
// and Debian's fortune cookies as a corpus split into training and validation by file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ember/data.h"
#include "ember/tensor.h"

namespace ember::data {

/// The sorted set of the characters (bytes) of a text; token i is the i-th character.
class CharVocabulary {
 public:
  /// ValueError for an empty text.
  explicit CharVocabulary(std::string_view text);
  /// The characters in token order, as chars() returns them (what a checkpoint stores).
  static CharVocabulary from_chars(std::string_view chars);

  int64_t size() const noexcept { return static_cast<int64_t>(chars_.size()); }
  /// The characters, token 0 first.
  const std::string& chars() const noexcept { return chars_; }
  /// int64 [text.size()] token ids; ValueError naming a character the vocabulary lacks.
  Tensor encode(std::string_view text) const;
  /// The characters of int64 token ids (any shape, any device); IndexError for an id outside
  /// [0, size()).
  std::string decode(const Tensor& tokens) const;
  int64_t token(char c) const;

 private:
  friend class Fortunes;
  CharVocabulary() = default;
  std::string chars_;
  std::vector<int16_t> token_of_;  // by byte value; -1 where absent
};

/// Every window of `context` + 1 consecutive tokens of a 1-D int64 tensor: item i is
/// {tokens[i : i + context], tokens[i + 1 : i + context + 1]}, the input and its next-token
/// targets. There are numel - context items; a DataLoader with shuffle(true) and a seed
/// draws random windows from its generator, the same ones in the same order as PyTorch's
/// RandomSampler with that seed over a dataset of this length.
class CharDataset : public Dataset {
 public:
  /// ValueError for a tensor that is not 1-D int64 on the cpu, a context below 1, or a
  /// context not shorter than the text ("context of 128 tokens needs a text of at least 129
  /// tokens, but the text has 50").
  CharDataset(Tensor tokens, int64_t context);
  size_t size() const override;
  /// IndexError past the end.
  Example get(size_t index) const override;
  int64_t context() const noexcept { return context_; }
  const Tensor& tokens() const noexcept { return tokens_; }

 private:
  Tensor tokens_;
  int64_t context_;
};

/// One file of fortune cookies: `%` lines separate the cookies; `text` is each cookie
/// followed by "%\n", empty cookies dropped.
struct FortuneFile {
  std::string name;
  std::string text;
  int64_t cookies = 0;
};

/// Debian's `fortunes` package (fortune-mod's cookie files, in /usr/share/games/fortunes):
/// the plain-text files of `root`, in name order. The index files (.dat), the .u8 links and
/// sub-directories (the offensive cookies of fortunes-off live in one) are skipped.
/// Split by file: file i (in name order) is for validation when i % validation_every ==
/// validation_every - 1, so no cookie is in both halves; validation_every 0 keeps them all
/// for training. The vocabulary covers both halves.
class Fortunes {
 public:
  static constexpr const char* kDefaultRoot = "/usr/share/games/fortunes";
  /// Error for a missing or unreadable root; ValueError for a root with no cookie file, a
  /// file with no cookie in it (empty), or a split that leaves either half empty.
  explicit Fortunes(const std::string& root = kDefaultRoot, int validation_every = 10);

  const std::vector<FortuneFile>& train_files() const noexcept { return train_; }
  const std::vector<FortuneFile>& validation_files() const noexcept { return validation_; }
  /// The files of a half, concatenated in name order.
  std::string train_text() const;
  std::string validation_text() const;
  const CharVocabulary& vocabulary() const noexcept { return vocabulary_; }

 private:
  std::vector<FortuneFile> train_, validation_;
  CharVocabulary vocabulary_;
};

/// A file of cookies (`%` lines separate them); ValueError when it holds none.
FortuneFile read_fortune_file(const std::string& path);

}  // namespace ember::data
