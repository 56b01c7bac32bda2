// The program ranks run in test_ember_run_options: `run_probe threads` prints the size of
// ember's cpu thread pool; `run_probe throw` dies with an uncaught ember::ValueError
// (its error file is what the test reads).
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
  std::fprintf(stderr, "usage: run_probe threads|throw\n");
  return 2;
}
