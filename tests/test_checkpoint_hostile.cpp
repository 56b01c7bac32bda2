// Checkpoints under hostile use (issue 27): headers nested a million levels deep, bad values
// megabytes long, NUL padding, names that are not UTF-8, two ranks saving one file at once,
// symbolic links, files larger than memory. Every failure is an ember error naming the file
// and quoting no more than a short excerpt of the bad input.
#include <gtest/gtest.h>

#include <barrier>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

// Longer than any message that quotes only an excerpt of its input.
constexpr size_t kShortMessage = 600;

class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / ("ember_hostile_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(path_)) names.insert(entry.path().filename().string());
    return names;
  }

 private:
  fs::path path_;
};

std::string le64_bytes(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out;
}

void write_file(const std::string& path, const std::string& header, const std::string& data = "") {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::string bytes = le64_bytes(header.size()) + header + data;
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The message of the ValueError that loading `path` throws.
std::string load_error(const std::string& path) {
  try {
    load(path);
  } catch (const ValueError& err) {
    return err.what();
  }
  ADD_FAILURE() << "expected a ValueError loading " << path;
  return "";
}

void expect_short_error(const std::string& path, const std::string& problem) {
  const std::string message = load_error(path);
  EXPECT_NE(message.find("'" + path + "'"), std::string::npos) << message.substr(0, 2000);
  EXPECT_NE(message.find(problem), std::string::npos) << message.substr(0, 2000);
  EXPECT_LT(message.size(), kShortMessage) << message.substr(0, 2000);
}

std::string nested(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

std::string entry_with_shape(const std::string& shape) {
  return R"({"a":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,0]}})";
}

TEST(CheckpointHostile, HeadersNestedDeeperThan128LevelsAreRefusedBeforeParsing) {
  TempDir dir("deep");
  const std::string path = dir.file("deep.safetensors");
  write_file(path, entry_with_shape(nested(1'000'000)));  // a 2 MB header: overflowed the stack
  expect_short_error(path, "the header nests deeper than 128 levels");
  write_file(path, entry_with_shape(nested(10'000)));  // was a 20 KB message
  expect_short_error(path, "the header nests deeper than 128 levels");

  // The outermost object is level 1, a tensor's entry level 2: 126 arrays inside an entry
  // reach 128 (serde_json's limit) and load; one more does not.
  const std::string data(8, '\0');
  write_file(path, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":)" + nested(126) + "}}", data);
  EXPECT_EQ(load(path)["a"].sizes(), (IntList{2}));
  write_file(path, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":)" + nested(127) + "}}", data);
  expect_short_error(path, "the header nests deeper than 128 levels");

  // Brackets inside strings are text, not nesting.
  write_file(path,
             R"({"__metadata__":{"k":")" + std::string(1000, '[') +
                 R"("},"a":{"dtype":"F32","shape":[2],)"
                 R"("data_offsets":[0,8]}})",
             data);
  EXPECT_EQ(load_metadata(path).at("k"), std::string(1000, '['));

  // ember's own JSON inside the metadata is bounded the same way.
  write_file(path, R"({"__metadata__":{"ember.complex128":")" + nested(1'000'000) + R"("}})");
  expect_short_error(path, "metadata entry 'ember.complex128' nests deeper than 128 levels");
}

TEST(CheckpointHostile, ErrorsQuoteOnlyAnExcerptOfBadInput) {
  TempDir dir("excerpt");
  const std::string path = dir.file("long.safetensors");
  const std::string mb(1'000'000, 'x');
  write_file(path, R"({"a":{"dtype":")" + mb + R"(","shape":[0],"data_offsets":[0,0]}})");
  expect_short_error(path, "has unsupported dtype 'xxxx");
  expect_short_error(path, "... (1000000 bytes)");
  write_file(path, R"({"a":)" + mb + "}");  // an invalid literal a megabyte long
  expect_short_error(path, "the header is not valid JSON");
  write_file(path, R"({")" + mb + R"(":5})");  // a tensor named by a megabyte
  expect_short_error(path, "is not an object");
  std::string ones = "[1";
  for (int i = 0; i < 500'000; ++i) ones += ",1";
  write_file(path, R"({"a":{"dtype":"F32","shape":)" + ones + R"(],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_short_error(path, "needs 4 bytes but its data offsets span 8");
  write_file(path, R"({"a":{"dtype":"F32","shape":[1,")" + mb + R"("],"data_offsets":[0,8]}})");
  expect_short_error(path, "has an invalid shape: dimension '\"xxx");

  // Bytes outside printable text are escaped.
  write_file(path, std::string(R"({"a":{"dtype":"F\u0001","shape":[0],"data_offsets":[0,0]}})"));
  expect_short_error(path, R"(unsupported dtype 'F\x01')");

  // save quotes the same way.
  nn::StateDict undefined;
  undefined.insert(mb, Tensor());
  try {
    save(undefined, path);
    ADD_FAILURE() << "expected a ValueError";
  } catch (const ValueError& err) {
    EXPECT_LT(std::string(err.what()).size(), kShortMessage);
    EXPECT_NE(std::string(err.what()).find("is undefined"), std::string::npos);
  }
}

TEST(CheckpointHostile, OnlyWhitespaceMayPadAHeader) {
  TempDir dir("padding");
  const std::string path = dir.file("padded.safetensors");
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data(8, '\0');
  write_file(path, header + std::string(6, '\0'), data);
  expect_short_error(path, "the header has the byte '\\x00' at offset 54 after its JSON value");
  try {
    load_metadata(path);
    ADD_FAILURE() << "expected a ValueError";
  } catch (const ValueError& err) {
    EXPECT_NE(std::string(err.what()).find("'" + path + "'"), std::string::npos) << err.what();
  }
  write_file(path, header + "  x", data);
  expect_short_error(path, "the header has the byte 'x' at offset 56");
  // Spaces (the writer's padding) and the other JSON whitespace the reference reader
  // (serde_json) accepts.
  write_file(path, header + "   ", data);
  EXPECT_EQ(load(path)["a"].sizes(), (IntList{2}));
  write_file(path, header + "\n\t\r ", data);
  EXPECT_EQ(load(path)["a"].sizes(), (IntList{2}));
}

TEST(CheckpointHostile, SaveRefusesTextThatIsNotUtf8WithAValueError) {
  TempDir dir("utf8");
  const std::string path = dir.file("names.safetensors");
  for (const std::string bad : {"w\xff", "\xc0\xaf", "\xed\xa0\x80", "a\xe2\x82", "\xf4\x90\x80\x80"}) {
    EXPECT_THROW_MSG(save(nn::StateDict{{bad, ones({1})}}, path), ValueError, "is not valid UTF-8");
    EXPECT_THROW_MSG(save(nn::StateDict{{"w", ones({1})}}, path, {{bad, "v"}}), ValueError,
                     "ember::save: metadata key");
    EXPECT_THROW_MSG(save(nn::StateDict{{"w", ones({1})}}, path, {{"k", bad}}), ValueError,
                     "ember::save: metadata value");
  }
  EXPECT_TRUE(dir.entries().empty());
  // Names in any script round-trip.
  nn::StateDict sd;
  sd.insert("poids.\xc3\xa9", ones({1}));            // é
  sd.insert("\xe6\x9d\x83\xe9\x87\x8d", ones({2}));  // 权重
  sd.insert("\xf0\x9f\x94\xa5", ones({3}));          // a 4-byte character
  save(sd, path, {{"note", "\xc3\xa9t\xc3\xa9"}});
  EXPECT_EQ(load(path).keys(), sd.keys());
  EXPECT_EQ(load_metadata(path).at("note"), "\xc3\xa9t\xc3\xa9");
}

TEST(CheckpointHostile, ConcurrentSavesToOnePathEachReplaceTheFileWhole) {
  // Two ranks saving the same checkpoint: every save succeeds, and the file is always one
  // of them whole.
  TempDir dir("concurrent");
  const std::string path = dir.file("shared.safetensors");
  constexpr int kRounds = 40;
  std::barrier sync(2);
  std::vector<std::string> errors[2];
  auto rank = [&](int r) {
    nn::StateDict sd;
    sd.insert("w", full({64, 1024}, static_cast<double>(r)));
    for (int round = 0; round < kRounds; ++round) {
      sync.arrive_and_wait();
      try {
        save(sd, path, {{"rank", std::to_string(r)}});
      } catch (const std::exception& err) {
        errors[r].push_back(err.what());
      }
      sync.arrive_and_wait();
      if (r == 0) {
        try {
          const std::string saver = load_metadata(path).at("rank");
          const Tensor w = load(path)["w"];
          if (!w.equal(full({64, 1024}, std::stod(saver)))) errors[r].push_back("a mix of both saves");
        } catch (const std::exception& err) {
          errors[r].push_back(err.what());
        }
      }
    }
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  EXPECT_TRUE(errors[0].empty()) << errors[0].size() << " failures, first: " << errors[0][0];
  EXPECT_TRUE(errors[1].empty()) << errors[1].size() << " failures, first: " << errors[1][0];
  EXPECT_EQ(dir.entries(), std::set<std::string>{"shared.safetensors"});  // no temporary file left
}

TEST(CheckpointHostile, SaveWritesThroughSymbolicLinks) {
  // As torch.save and safetensors do: the link stays, its target gets the new checkpoint.
  TempDir dir("symlink");
  save(nn::StateDict{{"old", zeros({1})}}, dir.file("real.safetensors"));
  fs::create_symlink("real.safetensors", dir.file("link.safetensors"));             // relative
  fs::create_symlink(dir.file("link.safetensors"), dir.file("chain.safetensors"));  // absolute, to a link
  save(nn::StateDict{{"new", ones({2})}}, dir.file("link.safetensors"));
  EXPECT_TRUE(fs::is_symlink(dir.file("link.safetensors")));
  EXPECT_EQ(load(dir.file("real.safetensors")).keys(), std::vector<std::string>{"new"});
  save(nn::StateDict{{"newer", ones({3})}}, dir.file("chain.safetensors"));
  EXPECT_TRUE(fs::is_symlink(dir.file("chain.safetensors")));
  EXPECT_TRUE(fs::is_symlink(dir.file("link.safetensors")));
  EXPECT_EQ(load(dir.file("real.safetensors")).keys(), std::vector<std::string>{"newer"});
  // A dangling link: the save creates the file it names.
  fs::create_symlink("later.safetensors", dir.file("dangling.safetensors"));
  save(nn::StateDict{{"w", ones({1})}}, dir.file("dangling.safetensors"));
  EXPECT_TRUE(fs::is_symlink(dir.file("dangling.safetensors")));
  EXPECT_EQ(load(dir.file("later.safetensors")).keys(), std::vector<std::string>{"w"});
  EXPECT_EQ(dir.entries(), (std::set<std::string>{"real.safetensors", "link.safetensors", "chain.safetensors",
                                                  "dangling.safetensors", "later.safetensors"}));
  // A loop is a ValueError, not a hang.
  fs::create_symlink("loop_b", dir.file("loop_a"));
  fs::create_symlink("loop_a", dir.file("loop_b"));
  EXPECT_THROW_MSG(save(nn::StateDict{{"w", ones({1})}}, dir.file("loop_a")), ValueError,
                   "too many levels of symbolic links");
}

TEST(CheckpointHostile, AFailedSaveLeavesNoTemporaryFile) {
  TempDir dir("failed_save");
  fs::create_directory(dir.file("model.safetensors"));  // the target is a directory: the rename fails
  EXPECT_THROW_MSG(save(nn::StateDict{{"w", ones({4})}}, dir.file("model.safetensors")), ValueError,
                   "ember::save: cannot replace '" + dir.file("model.safetensors") + "'");
  EXPECT_EQ(dir.entries(), std::set<std::string>{"model.safetensors"});
}

TEST(CheckpointHostile, AFileLargerThanMemoryCanBeInspectedAndLoadingItNamesIt) {
  TempDir dir("huge");
  const std::string path = dir.file("huge.safetensors");
  const uint64_t data_bytes = uint64_t{1} << 40;  // 1 TiB of float32, a sparse file
  std::string header = R"({"__metadata__":{"step":"7"},"w":{"dtype":"F32","shape":[)" + std::to_string(data_bytes / 4) +
                       R"(],"data_offsets":[0,)" + std::to_string(data_bytes) + "]}}";
  write_file(path, header);
  std::error_code ec;
  fs::resize_file(path, 8 + header.size() + data_bytes, ec);
  if (ec) GTEST_SKIP() << "this file system holds no 1 TiB sparse file: " << ec.message();
  EXPECT_EQ(load_metadata(path), (std::map<std::string, std::string>{{"step", "7"}}));

  // Allocating 1 TiB fails where the kernel refuses what it cannot back (overcommit modes 0
  // and 2 with less than 1 TiB of memory and swap).
  EMBER_SKIP_UNLESS_HUGE_ALLOCATIONS_FAIL();
  EXPECT_THROW_MSG(load(path), OutOfMemoryError, "ember::load: '" + path + "': not enough memory for tensor 'w'");
}

}  // namespace
}  // namespace ember
