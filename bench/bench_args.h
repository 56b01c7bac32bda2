// For the benchmarks that read their own command line (bench_allreduce, bench_ddp,
// bench_gpu; Google Benchmark reads the others'): what every such program does with an
// argument that is none of its own options.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

/// --help and -h print `usage` to stdout and exit 0; Google Benchmark's --benchmark_* flags
/// are ignored (scripts/gpu-run passes them to every bench_*); anything else is refused:
/// "PROGRAM: unknown option ARG" and `usage` on stderr, exit 2.
inline void other_argument(const char* program, const char* arg, const char* usage) {
  if (!std::strcmp(arg, "--help") || !std::strcmp(arg, "-h")) {
    std::fputs(usage, stdout);
    std::exit(0);
  }
  if (!std::strncmp(arg, "--benchmark", 11)) return;
  std::fprintf(stderr, "%s: unknown option %s\n%s", program, arg, usage);
  std::exit(2);
}
