// Character-level text data: CharVocabulary, CharDataset's next-token windows drawn by a
// DataLoader, and Fortunes' split by file (over temporary cookie files, and over Debian's
// fortunes package when it is installed). The window order for a seed is PyTorch 1.13's
// DataLoader(range(8), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(3)):
// [1, 5, 6, 3, 4, 7, 0, 2].
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ember/ember.h"
#include "test_support.h"

namespace ember::testing {
namespace {

namespace fs = std::filesystem;
using data::CharDataset;
using data::CharVocabulary;
using data::Fortunes;

TEST(CharVocabulary, IsTheSortedSetOfCharacters) {
  CharVocabulary v("hello, world");
  EXPECT_EQ(v.chars(), " ,dehlorw");
  EXPECT_EQ(v.size(), 9);
  Tensor ids = v.encode("lower");
  EXPECT_EQ(ids.dtype(), kInt64);
  EXPECT_EQ(ids.to_vector<int64_t>(), (std::vector<int64_t>{5, 6, 8, 3, 7}));
  EXPECT_EQ(v.decode(ids), "lower");
  EXPECT_EQ(v.decode(ids.view({1, 5})), "lower");
  CharVocabulary again = CharVocabulary::from_chars(v.chars());
  EXPECT_EQ(again.encode("world").to_vector<int64_t>(), v.encode("world").to_vector<int64_t>());
}

TEST(CharVocabulary, RefusesWhatItCannotEncodeOrDecode) {
  CharVocabulary v("abc");
  EXPECT_THROW_MSG(v.encode("abd"), ValueError, "character 100 is not in the vocabulary of 3 characters");
  EXPECT_THROW_MSG(v.decode(tensor({0, 3}, kInt64)), IndexError, "token 3 is out of range for 3 characters");
  EXPECT_THROW_MSG(v.decode(tensor({0.0f})), TypeError, "expected int64 token ids");
  EXPECT_THROW_MSG(CharVocabulary(""), ValueError, "the text is empty");
  EXPECT_THROW_MSG(CharVocabulary::from_chars("aba"), ValueError, "character 97 appears twice");
}

TEST(CharDataset, ItemsAreWindowsAndTheirNextTokens) {
  CharVocabulary v("abcdefghij");
  CharDataset ds(v.encode("abcdefghij"), 3);
  EXPECT_EQ(ds.size(), 7u);
  data::Example e = ds.get(2);
  EXPECT_EQ(v.decode(e.data), "cde");
  EXPECT_EQ(v.decode(e.target), "def");
  EXPECT_EQ(v.decode(ds.get(6).target), "hij");
  EXPECT_THROW_MSG(ds.get(7), IndexError, "index 7 is out of bounds for dimension 0 with size 7");
}

TEST(CharDataset, LoaderDrawsWindowsFromItsSeededGenerator) {
  CharVocabulary v("abcdefghij");
  CharDataset ds(v.encode("abcdefghij"), 2);
  auto first_batch = [&](uint64_t seed) {
    data::DataLoader loader(ds, data::DataLoaderOptions().batch_size(8).shuffle(true).seed(seed));
    return *loader.begin();
  };
  data::Example batch = first_batch(3);
  ASSERT_EQ(batch.data.sizes(), (std::vector<int64_t>{8, 2}));
  // Window i starts at character i: PyTorch's loader draws 1, 5, 6, 3, 4, 7, 0, 2 for seed 3.
  EXPECT_EQ(v.decode(batch.data), "bcfgghdeefhiabcd");
  EXPECT_EQ(v.decode(batch.target), "cdghhieffgijbcde");
  EXPECT_TRUE(first_batch(3).data.equal(batch.data));
  EXPECT_FALSE(first_batch(4).data.equal(batch.data));
}

TEST(CharDataset, RefusesAContextTheTextCannotHold) {
  Tensor ids = CharVocabulary("abc").encode("abcab");
  EXPECT_THROW_MSG(CharDataset(ids, 5), ValueError,
                   "a context of 5 tokens needs a text of at least 6 tokens, but the text has 5");
  EXPECT_THROW_MSG(CharDataset(ids, 0), ValueError, "context must be at least 1, got 0");
  EXPECT_THROW_MSG(CharDataset(ids.to(kFloat32), 2), ValueError, "expected a 1-D int64 cpu tensor");
}

// A temporary directory of cookie files, removed at the end.
class CookieDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ember_fortunes_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::string root() const { return dir_.string(); }
  fs::path dir_;
};

TEST_F(CookieDir, SplitsByFileAndSkipsIndexesAndSubdirectories) {
  write("a", "Alpha one.\n%\nAlpha two.\n%\n");
  write("a.dat", "binary index");
  write("a.u8", "a link in the package");
  write("b", "Beta.\n%\n\n%\n");  // the second cookie is blank: dropped
  write("c", "Gamma\nlines.\n");  // the last cookie needs no closing %
  fs::create_directories(dir_ / "off");
  write("off/rude", "Offensive.\n%\n");
  Fortunes f(root(), /*validation_every=*/2);
  ASSERT_EQ(f.train_files().size(), 2u);
  ASSERT_EQ(f.validation_files().size(), 1u);
  EXPECT_EQ(f.train_files()[0].name, "a");
  EXPECT_EQ(f.train_files()[0].cookies, 2);
  EXPECT_EQ(f.validation_files()[0].name, "b");
  EXPECT_EQ(f.validation_files()[0].cookies, 1);
  EXPECT_EQ(f.train_text(), "Alpha one.\n%\nAlpha two.\n%\nGamma\nlines.\n%\n");
  EXPECT_EQ(f.validation_text(), "Beta.\n%\n");
  EXPECT_EQ(f.vocabulary().chars(), "\n %.ABGaehilmnopstw");
}

TEST_F(CookieDir, EmptyCorpusIsAClearError) {
  EXPECT_THROW_MSG(Fortunes{root()}, ValueError, "holds no cookie file");
  write("a", "");
  EXPECT_THROW_MSG(Fortunes(root(), 0), ValueError, "holds no cookie (the file is empty)");
  write("a", "%\n\n%\n");
  EXPECT_THROW_MSG(Fortunes(root(), 0), ValueError, "holds no cookie (the file is empty)");
  write("a", "One.\n");
  EXPECT_THROW_MSG(Fortunes(root(), 2), ValueError, "cannot be split with validation_every 2");
  EXPECT_EQ(Fortunes(root(), 0).train_text(), "One.\n%\n");
  EXPECT_THROW_MSG(Fortunes{root() + "/missing"}, Error, "is not a directory");
  EXPECT_THROW_MSG(Fortunes(root(), -1), ValueError, "validation_every must be >= 0");
}

TEST(Fortunes, DebianCorpusSplitsWithoutSharingAFile) {
  if (!fs::is_directory(Fortunes::kDefaultRoot)) GTEST_SKIP() << "Debian's fortunes package is not installed";
  Fortunes f;
  EXPECT_GT(f.train_files().size(), 3 * f.validation_files().size());
  EXPECT_FALSE(f.validation_files().empty());
  for (const auto& v : f.validation_files()) {
    for (const auto& t : f.train_files()) EXPECT_NE(v.name, t.name);
  }
  EXPECT_GT(f.train_text().size(), size_t{1} << 20);
  EXPECT_GT(f.vocabulary().size(), 90);
  EXPECT_LT(f.vocabulary().size(), 256);
  Tensor ids = f.vocabulary().encode(f.validation_text());
  EXPECT_EQ(f.vocabulary().decode(ids.slice(0, 0, 100)), f.validation_text().substr(0, 100));
}

}  // namespace
}  // namespace ember::testing
