// 2-rank all_reduce latency and bus bandwidth, ember's gloo process group beside
// torch.distributed's gloo backend (Debian's python3-torch), in the same run.
//
//   bench_allreduce [--rounds=N] [--max-bytes=B]
//
// ember's ranks run under ember-run (this program with --rank-worker); PyTorch's run
// bench/allreduce_torch.py under /usr/bin/python3. Both time float32 all_reduce(SUM) of
// 256 B .. 64 MiB, each call on its own, with the same iteration counts. The machine's
// load moves both alike: the runs alternate, N rounds of (ember, torch) then (torch,
// ember), and the table gives each side's median and minimum over every call of every
// round on rank 0, with the load average before each round. Bus bandwidth is
// bytes * 2 (n - 1) / n / median time (nccl-tests' busbw; n = 2). A third column calls
// gloo::allreduce directly from ember's rank processes (no ember), timed the same way.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "bench_args.h"
#include "ember/ember.h"
#include "rank_launch.h"

namespace dist = ember::distributed;

namespace {

int64_t iterations(int64_t bytes) { return std::max<int64_t>(10, std::min<int64_t>(400, (int64_t{64} << 20) / bytes)); }

/// One line of per-call times from rank 0: "<name> <bytes> <us> <us> ...".
void print_samples(const char* name, int64_t bytes, const std::vector<double>& samples) {
  std::printf("%s %lld", name, static_cast<long long>(bytes));
  for (double us : samples) std::printf(" %.1f", us);
  std::printf("\n");
  std::fflush(stdout);
}

/// Times each of iterations(bytes) calls of `once`, in microseconds.
template <typename Once>
std::vector<double> time_calls(int64_t bytes, Once&& once) {
  std::vector<double> samples;
  for (int64_t i = 0, n = iterations(bytes); i < n; ++i) {
    auto start = std::chrono::steady_clock::now();
    once();
    samples.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  return samples;
}

std::vector<int64_t> sizes(int64_t max_bytes) {
  std::vector<int64_t> out;
  for (int64_t b = 256; b <= max_bytes; b *= 4) out.push_back(b);
  return out;
}

/// The same loop on gloo::allreduce itself, meeting through a gloo FileStore.
int raw_gloo(int rank, int64_t max_bytes) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(std::getenv("EMBER_BENCH_GLOO_DIR"));
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, 2);
  context->connectFullMesh(store, device);
  uint32_t tag = 0;
  for (int64_t bytes : sizes(max_bytes)) {
    std::vector<float> data(static_cast<size_t>(bytes / 4));
    auto once = [&] {
      gloo::AllreduceOptions options(context);
      options.setOutput(data.data(), data.size());
      options.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      options.setTag(tag++);
      gloo::allreduce(options);
    };
    for (int i = 0; i < 5; ++i) once();
    auto samples = time_calls(bytes, once);
    if (rank == 0) print_samples("gloo", bytes, samples);
  }
  return 0;
}

int rank_worker(int64_t max_bytes) {
  dist::init_process_group("gloo", dist::InitOptions().timeout(std::chrono::seconds(120)));
  for (int64_t bytes : sizes(max_bytes)) {
    ember::Tensor t = ember::zeros({bytes / 4});
    for (int i = 0; i < 5; ++i) dist::all_reduce(t);
    dist::barrier();
    auto samples = time_calls(bytes, [&] { dist::all_reduce(t); });
    if (dist::get_rank() == 0) print_samples("ember", bytes, samples);
  }
  int rank = dist::get_rank();
  dist::barrier();
  dist::destroy_process_group();
  return raw_gloo(rank, max_bytes);
}

using Samples = std::map<std::string, std::map<int64_t, std::vector<double>>>;

/// Runs `command`, adding its "name bytes us us ..." lines to `out`.
void collect(const std::string& command, Samples& out) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return;
  char* line = nullptr;
  size_t capacity = 0;
  while (::getline(&line, &capacity, pipe) > 0) {
    char tag[16];
    long long bytes;
    int used = 0;
    if (std::sscanf(line, "%15s %lld%n", tag, &bytes, &used) != 2) continue;
    auto& samples = out[tag][bytes];
    char* p = line + used;
    for (char* end = nullptr;; p = end) {
      double us = std::strtod(p, &end);
      if (end == p) break;
      samples.push_back(us);
    }
  }
  std::free(line);
  int status = ::pclose(pipe);
  if (status != 0) std::fprintf(stderr, "bench_allreduce: '%s' exited with status %d\n", command.c_str(), status);
}

double load_average() {
  double load = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = 0;
    std::fclose(f);
  }
  return load;
}

/// {median, min} of `samples` (0, 0 when empty).
std::pair<double, double> median_min(std::vector<double> samples) {
  if (samples.empty()) return {0, 0};
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front()};
}

constexpr const char* kUsage = "usage: bench_allreduce [--rounds=N] [--max-bytes=B] [--help]\n";

std::string human(int64_t bytes) {
  if (bytes >= (1 << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1 << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 4;
  int64_t max_bytes = int64_t{64} << 20;
  bool worker = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) rounds = std::max(1, std::atoi(argv[i] + 9));
    else if (std::strncmp(argv[i], "--max-bytes=", 12) == 0) max_bytes = std::atoll(argv[i] + 12);
    else if (std::strcmp(argv[i], "--rank-worker") == 0) worker = true;
    else other_argument("bench_allreduce", argv[i], kUsage);
  }
  if (worker) return rank_worker(max_bytes);

  std::string self = argv[0], args = " --max-bytes=" + std::to_string(max_bytes);
  Samples samples;
  std::string loads;
  for (int round = 0; round < rounds; ++round) {
    char load[32];
    std::snprintf(load, sizeof(load), "%s%.1f", round ? ", " : "", load_average());
    loads += load;
    auto ember_run = [&] {
      char gloo_dir[] = "/tmp/ember_bench_gloo_XXXXXX";
      if (!::mkdtemp(gloo_dir)) return;
      collect("EMBER_BENCH_GLOO_DIR=" + std::string(gloo_dir) + " " + std::string(EMBER_RUN_PATH) +
                  " --nproc-per-node=2 " + self + " --rank-worker" + args,
              samples);
      std::filesystem::remove_all(gloo_dir);
    };
    auto torch_run = [&] {
      std::string command = "/usr/bin/python3 " + std::string(EMBER_BENCH_SOURCE_DIR) + "/allreduce_torch.py " +
                            std::to_string(free_port());
      for (int64_t b : sizes(max_bytes)) command += " " + std::to_string(b);
      collect(command + " 2>/dev/null", samples);
    };
    if (round % 2 == 0) {
      ember_run();
      torch_run();
    } else {
      torch_run();
      ember_run();
    }
  }

  std::printf(
      "2-rank all_reduce (float32 SUM, gloo, loopback), %d alternating rounds; 1-minute load average before "
      "each round: %s\n",
      rounds, loads.c_str());
  std::printf("%-8s %9s %9s %9s %9s %9s %9s %11s %11s %10s %10s\n", "size", "ember med", "ember min", "torch med",
              "torch min", "gloo med", "gloo min", "e/t median", "e/t min", "ember GB/s", "torch GB/s");
  for (int64_t b : sizes(max_bytes)) {
    auto [em, en] = median_min(samples["ember"][b]);
    auto [tm, tn] = median_min(samples["torch"][b]);
    auto [gm, gn] = median_min(samples["gloo"][b]);
    auto busbw = [&](double us) { return us > 0 ? static_cast<double>(b) / (us * 1e3) : 0.0; };  // 2(n-1)/n = 1
    std::printf("%-8s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %11.2f %11.2f %10.3f %10.3f\n", human(b).c_str(), em, en, tm,
                tn, gm, gn, tm > 0 ? em / tm : 0.0, tn > 0 ? en / tn : 0.0, busbw(em), busbw(tm));
  }
  return samples["ember"].empty() ? 1 : 0;
}
