// The checkpoint reader's fuzz target (issue 27): ember::load and ember::load_metadata on
// mutated safetensors files, and ember::save of names and metadata made of random bytes.
// Every outcome must be a result or an ember::Error; a crash (which the ASan+UBSan build
// turns every memory or undefined-behaviour error into) or any other exception type fails.
//
// LLVMFuzzerTestOneInput is the libFuzzer entry point. Without libFuzzer (GCC builds, where
// CI runs it), main() drives it with a seeded, deterministic mutation loop over valid files
// written by ember::save:
//   fuzz_checkpoint [--seed S] [--iterations N] [--seconds T]   the loop (T only caps it)
//   fuzz_checkpoint FILE...                                     replays inputs
// Each input is written to ./fuzz_checkpoint.<pid>.input before it is read, so after a
// crash that file holds the input that caused it.
#include <unistd.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include "ember/ember.h"
#include "fuzz_driver.h"

namespace {

// Per process, so libFuzzer's parallel jobs do not share it.
const std::string kInputPath = "fuzz_checkpoint." + std::to_string(::getpid()) + ".input";
// Removes the input files at a normal exit; after a crash they stay for inspection.
struct RemoveInputsAtExit {
  ~RemoveInputsAtExit() {
    std::remove(kInputPath.c_str());
    std::remove((kInputPath + ".saved").c_str());
  }
} remove_inputs_at_exit;
uint64_t loaded_count = 0;  // inputs load() accepted, for the summary

[[noreturn]] void fail(const std::string& what) {
  std::cerr << "fuzz_checkpoint: FAILED: " << what << "\n  the input is in " << kInputPath << "\n";
  std::abort();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  // A new file each time: ext4 flushes a file truncated or renamed over an existing one on
  // close (auto_da_alloc), which would make the loop wait on the disk.
  std::remove(path.c_str());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) fail("cannot write " + path);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `call`; an ember::Error is an accepted outcome, anything else a failure.
template <typename F>
bool only_ember_errors(const char* what, F&& call) {
  try {
    call();
    return true;
  } catch (const ember::Error&) {
    return false;
  } catch (const std::exception& err) {
    fail(std::string(what) + " threw " + typeid(err).name() + ": " + std::string(err.what()).substr(0, 300));
  } catch (...) {
    fail(std::string(what) + " threw a non-std exception");
  }
}

// save() of random names and metadata: an ember::Error, or a file that loads back the same.
void fuzz_save(const std::string& name, const std::string& key, const std::string& value) {
  ember::nn::StateDict sd;
  sd.insert(name, ember::arange(3, ember::kFloat32));
  const std::string path = kInputPath + ".saved";
  std::remove(path.c_str());  // as in write_bytes
  if (!only_ember_errors("save", [&] { ember::save(sd, path, {{key, value}}); })) return;
  ember::nn::StateDict loaded;
  std::map<std::string, std::string> metadata;
  if (!only_ember_errors("load of a saved file", [&] { loaded = ember::load(path); }) ||
      !only_ember_errors("load_metadata of a saved file", [&] { metadata = ember::load_metadata(path); }))
    fail("a file save wrote does not load");
  if (loaded.keys() != sd.keys() || metadata.at(key) != value) fail("a saved file loads back different names");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  write_bytes(kInputPath, std::string(reinterpret_cast<const char*>(data), size));
  if (only_ember_errors("load", [&] { ember::load(kInputPath); })) ++loaded_count;
  only_ember_errors("load_metadata", [&] { ember::load_metadata(kInputPath); });
  return 0;
}

#ifndef EMBER_LIBFUZZER
namespace {

// Valid files to mutate: ember's own (every dtype, complex128, metadata) and the layout
// of the reference writer.
std::vector<std::string> seed_files() {
  using namespace ember;
  std::vector<nn::StateDict> dicts(4);
  dicts[0].insert("weight", arange(6, kFloat32).view({2, 3}));
  dicts[0].insert("bias", tensor({0.5, -1.0}).to(kFloat64));
  dicts[0].insert("mask", tensor({true, false, true}));
  dicts[0].insert("steps", tensor(int64_t{5}));
  dicts[1].insert("z128", tensor({std::complex<double>(1, 2)}).to(kComplex128));
  dicts[1].insert("z64", tensor({std::complex<double>(3, 4)}).to(kComplex64));
  dicts[1].insert("half", tensor({1.5, 2.0}).to(kFloat16));
  dicts[1].insert("bf", tensor({1.5}).to(kBFloat16));
  dicts[2].insert("empty", zeros({0, 3}));
  dicts[2].insert("i8", tensor({-1, 2}).to(kInt8));
  dicts[2].insert("u8", tensor({1, 255}).to(kUInt8));
  dicts[2].insert("i16", tensor({-300}).to(kInt16));
  dicts[2].insert("i32", tensor({7}).to(kInt32));
  std::vector<std::string> seeds;
  const std::string path = kInputPath + ".seed";
  for (size_t i = 0; i < dicts.size(); ++i) {
    std::map<std::string, std::string> metadata;
    if (i % 2 == 0) metadata = {{"format", "pt"}, {"epoch", "3"}};
    save(dicts[i], path, metadata);
    seeds.push_back(read_bytes(path));
  }
  std::remove(path.c_str());
  std::string header = R"({"__metadata__":{"format":"pt"},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]},)"
                       R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string reference(8, '\0');
  for (int b = 0; b < 8; ++b) reference[b] = static_cast<char>(uint64_t(header.size()) >> (8 * b));
  seeds.push_back(reference + header + std::string(12, '\1'));
  return seeds;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed, std::vector<std::string> seeds) : rng_(seed), seeds_(std::move(seeds)) {}

  std::string next() {
    std::string file = seeds_[below(seeds_.size())];
    const bool keep_length = below(2) == 0;  // mutate inside the header and fix its length after
    uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<unsigned char>(file[i]);
    std::string header = file.substr(8, header_bytes), data = file.substr(8 + header_bytes);
    std::string& target = keep_length ? header : file;
    for (size_t n = 1 + below(4); n > 0; --n) mutate(target);
    if (!keep_length) return file;
    std::string out(8, '\0');
    for (int b = 0; b < 8; ++b) out[b] = static_cast<char>(uint64_t(header.size()) >> (8 * b));
    if (below(4) == 0) mutate(data);
    return out + header + data;
  }

  std::string random_text() {
    static const std::string kPieces[] = {
        "a",  "\xc3\xa9", "\xff", "\xc0\xaf",           "\xed\xa0\x80", "\xf0\x9f\x94\xa5", "\xf4\x90\x80\x80",
        "\"", "\\",       "\n",   std::string(1, '\0'), "__metadata__", "ember.complex128", "{",
        "["};
    std::string text;
    for (size_t n = below(6); n > 0; --n) text += kPieces[below(std::size(kPieces))];
    return text;
  }

 private:
  size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  void mutate(std::string& s) {
    static const char kBytes[] = {'\0', '\xff', '\x7f', '\x80', '{', '}', '[', ']', '"',  '\\',
                                  ',',  ':',    ' ',    '0',    '9', '-', 'e', '.', '\n', 'u'};
    static const char* const kNumbers[] = {
        "0",     "1",   "-1", "4294967296", "9223372036854775807", "18446744073709551615", "18446744073709551616",
        "1e308", "2.5", "-0"};
    static const char* const kTokens[] = {"\"F32\"",     "\"BOOL\"",   "\"C64\"", "\"F8_E4M3\"", "\"__metadata__\"",
                                          "null",        "true",       "[]",      "{}",          "[[[[[[[[",
                                          "\"\\ud800\"", "\"\\u0000\""};
    const size_t at = below(s.size() + 1);
    switch (below(9)) {
      case 0:
        if (!s.empty()) s[at % s.size()] ^= static_cast<char>(1u << below(8));
        break;
      case 1:
        if (!s.empty()) s[at % s.size()] = kBytes[below(sizeof(kBytes))];
        break;
      case 2: s.erase(at, 1 + below(16)); break;
      case 3: s.insert(at, s.substr(below(s.size() + 1), 1 + below(64))); break;
      case 4: s.insert(at, kNumbers[below(std::size(kNumbers))]); break;
      case 5: {  // replace a run of digits with another number
        const size_t digit = s.find_first_of("0123456789", at);
        if (digit == std::string::npos) break;
        const size_t end = s.find_first_not_of("0123456789", digit);
        s.replace(digit, (end == std::string::npos ? s.size() : end) - digit, kNumbers[below(std::size(kNumbers))]);
        break;
      }
      case 6: s.insert(at, kTokens[below(std::size(kTokens))]); break;
      case 7: s.resize(at); break;
      case 8: {  // deep nesting, around the 128-level limit
        const size_t levels = below(2) ? 120 + below(16) : below(400);
        s.insert(at, std::string(levels, below(2) ? '[' : '{'));
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  std::vector<std::string> seeds_;
};

}  // namespace

int main(int argc, char** argv) {
  return fuzz::run(
      "fuzz_checkpoint", argc, argv,
      [](uint64_t seed) {
        return [mutator = Mutator(seed, seed_files())](uint64_t index) mutable {
          std::string input = mutator.next();
          if (index % 16 == 0) fuzz_save(mutator.random_text(), mutator.random_text(), mutator.random_text());
          return input;
        };
      },
      [] { return std::to_string(loaded_count) + " loaded, the others refused"; });
}
#endif
