// The command-line reading the example programs share: `--flag value` and bare `--flag`
// options, each value read whole into its type, and one `usage(problem)` per program for
// every mistake ("--steps: expected an integer, got 'x'", "--lr needs a value", "unknown
// option --x"), which prints the problem and the usage to stderr and exits 2; `--help` and
// `-h` print the usage to stdout and exit 0. And the flags train and charlm both take.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <system_error>

namespace examples {

/// What each program's `usage(problem)` does: "PROGRAM: problem" and the usage on stderr, exit 2.
[[noreturn]] inline void refuse(const char* program, const std::string& problem, const char* usage_text) {
  std::cerr << program << ": " << problem << "\n" << usage_text;
  std::exit(2);
}

class Flags {
 public:
  using Usage = void (*)(const std::string& problem);  // prints the problem and exits

  /// `usage_text` is what --help prints, the text `usage` prints after a problem.
  Flags(int argc, char** argv, Usage usage, const char* usage_text)
      : argc_(argc), argv_(argv), usage_(usage), usage_text_(usage_text) {}

  /// Moves to the next option; false after the last. --help and -h print the usage and exit 0.
  bool next() {
    if (++i_ >= argc_) return false;
    flag_ = argv_[i_];
    if (flag_ == "--help" || flag_ == "-h") {
      std::cout << usage_text_;
      std::exit(0);
    }
    return true;
  }
  /// Whether the current option is `name`.
  bool is(const char* name) const { return flag_ == name; }

  /// The current option's value, read into `out`; a missing or malformed one goes to usage.
  void read(std::string& out) { out = value(); }
  void read(int& out) { parse(out, "an integer"); }
  void read(int64_t& out) { parse(out, "an integer"); }
  void read(uint64_t& out) { parse(out, "a non-negative integer"); }
  void read(double& out) { parse(out, "a number"); }

  /// Reports the current option as one the program does not know.
  [[noreturn]] void unknown() const { fail("unknown option " + flag_); }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    usage_(problem);
    std::abort();  // not reached: usage exits
  }

  const char* value() {
    if (i_ + 1 >= argc_) fail(flag_ + " needs a value");
    return argv_[++i_];
  }

  // The whole text must be the value ("12x" is refused, as "x" is), and it must fit T.
  template <typename T>
  void parse(T& out, const char* expected) {
    const std::string text = value();
    T parsed{};
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
    if (error == std::errc::result_out_of_range) fail(flag_ + ": " + text + " is out of range");
    if (error != std::errc() || end != text.data() + text.size())
      fail(flag_ + ": expected " + expected + ", got '" + text + "'");
    out = parsed;
  }

  const int argc_;
  char** const argv_;
  const Usage usage_;
  const char* const usage_text_;
  int i_ = 0;
  std::string flag_;
};

/// The flags train and charlm both take; each program's Args derives from it and sets its
/// own defaults.
struct CommonArgs {
  int64_t batch_size = 0;
  double lr = 0;
  std::string device;
  bool disable_cuda = false;
  std::string checkpoint;
  bool resume = false;
  bool no_tf32 = false;
  uint64_t seed = 0;
  int workers = 0;
  std::string data;
  bool ddp = false;
  bool data_parallel = false;
};

/// Reads the current option into `args` when it is one of the common ones; false when not.
inline bool read_common_flag(Flags& flags, CommonArgs& args) {
  if (flags.is("--batch-size")) flags.read(args.batch_size);
  else if (flags.is("--lr")) flags.read(args.lr);
  else if (flags.is("--device")) flags.read(args.device);
  else if (flags.is("--disable-cuda")) args.disable_cuda = true;
  else if (flags.is("--checkpoint")) flags.read(args.checkpoint);
  else if (flags.is("--resume")) args.resume = true;
  else if (flags.is("--no-tf32")) args.no_tf32 = true;
  else if (flags.is("--seed")) flags.read(args.seed);
  else if (flags.is("--workers")) flags.read(args.workers);
  else if (flags.is("--data")) flags.read(args.data);
  else if (flags.is("--ddp")) args.ddp = true;
  else if (flags.is("--data-parallel")) args.data_parallel = true;
  else return false;
  return true;
}

/// The common flags' own conflicts, reported through `usage`.
inline void check_common_flags(const CommonArgs& args, Flags::Usage usage) {
  if (args.resume && args.checkpoint.empty()) usage("--resume needs --checkpoint FILE");
  if (args.ddp && args.data_parallel) usage("--ddp and --data-parallel do not go together");
}

}  // namespace examples
