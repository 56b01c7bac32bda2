// The command-line reading examples/train and examples/charlm share: `--flag value` and
// bare `--flag` options, each value read whole into its type, and one `usage(problem)` per
// program for every mistake ("--steps: expected an integer, got 'x'", "--lr needs a
// value", "unknown option --x").
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <system_error>

namespace examples {

class Flags {
 public:
  using Usage = void (*)(const std::string& problem);  // prints the problem and exits

  Flags(int argc, char** argv, Usage usage) : argc_(argc), argv_(argv), usage_(usage) {}

  /// Moves to the next option; false after the last.
  bool next() {
    if (++i_ >= argc_) return false;
    flag_ = argv_[i_];
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
  int i_ = 0;
  std::string flag_;
};

}  // namespace examples
