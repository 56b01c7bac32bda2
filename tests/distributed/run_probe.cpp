// The program ranks run in test_ember_run_options: `run_probe threads` prints the size of
// ember's cpu thread pool; `run_probe throw` dies with an uncaught ember::ValueError
// (its error file is what the test reads); `run_probe throw-bytes` dies with one whose
// message is not UTF-8 (test_distributed_error_file).
#include <cstdio>
#include <cstring>

#include "ember/errors.h"
#include "kernels/parallel.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "threads") == 0) {
    std::printf("threads=%d\n", ember::detail::num_threads());
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "throw") == 0) throw ember::ValueError("probe: a bad value");
  // Latin-1 bytes, UTF-8 "é" and "€", a quote, a control byte and a truncated sequence.
  if (argc > 1 && std::strcmp(argv[1], "throw-bytes") == 0) {
    throw ember::ValueError("probe: f\xfcr caf\xc3\xa9 \xe2\x82\xac \"q\" \x01 end\xe2\x82");
  }
  std::fprintf(stderr, "usage: run_probe threads|throw|throw-bytes\n");
  return 2;
}
