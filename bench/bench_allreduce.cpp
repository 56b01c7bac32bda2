// 2-rank all_reduce latency and bus bandwidth, ember's gloo process group beside
// torch.distributed's gloo backend (Debian's python3-torch), in the same run.
//
//   bench_allreduce [--repetitions=N] [--max-bytes=B]
//
// ember's ranks run under ember-run (this program with --rank-worker); PyTorch's run
// bench/allreduce_torch.py under /usr/bin/python3. Both time float32 all_reduce(SUM) of
// 256 B .. 64 MiB with the same iteration counts: the best repetition's mean per call on
// rank 0. Bus bandwidth is bytes * 2 (n - 1) / n / time (nccl-tests' busbw; n = 2).
// A third column calls gloo::allreduce directly from the same ranks (no ember), the floor
// that ember's own overhead is measured against.
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
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "ember/ember.h"
#include "rank_launch.h"

namespace dist = ember::distributed;

namespace {

int64_t iterations(int64_t bytes) { return std::max<int64_t>(5, std::min<int64_t>(200, (int64_t{16} << 20) / bytes)); }

std::vector<int64_t> sizes(int64_t max_bytes) {
  std::vector<int64_t> out;
  for (int64_t b = 256; b <= max_bytes; b *= 4) out.push_back(b);
  return out;
}

/// The same loop on gloo::allreduce itself, meeting through a gloo FileStore.
int raw_gloo(int rank, int repetitions, int64_t max_bytes) {
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
    int64_t n = iterations(bytes);
    for (int i = 0; i < 3; ++i) once();
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r < repetitions; ++r) {
      auto start = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < n; ++i) once();
      std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      best = std::min(best, elapsed.count() / static_cast<double>(n));
    }
    if (rank == 0) std::printf("gloo %lld %.2f\n", static_cast<long long>(bytes), best * 1e6);
    std::fflush(stdout);
  }
  return 0;
}

int rank_worker(int repetitions, int64_t max_bytes) {
  dist::init_process_group("gloo", dist::InitOptions().timeout(std::chrono::seconds(120)));
  for (int64_t bytes : sizes(max_bytes)) {
    ember::Tensor t = ember::zeros({bytes / 4});
    int64_t n = iterations(bytes);
    for (int i = 0; i < 3; ++i) dist::all_reduce(t);
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r < repetitions; ++r) {
      dist::barrier();
      auto start = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < n; ++i) dist::all_reduce(t);
      std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      best = std::min(best, elapsed.count() / static_cast<double>(n));
    }
    if (dist::get_rank() == 0) std::printf("ember %lld %.2f\n", static_cast<long long>(bytes), best * 1e6);
    std::fflush(stdout);
  }
  int rank = dist::get_rank();
  dist::barrier();
  dist::destroy_process_group();
  return raw_gloo(rank, repetitions, max_bytes);
}

std::string human(int64_t bytes) {
  if (bytes >= (1 << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1 << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

}  // namespace

int main(int argc, char** argv) {
  int repetitions = 3;
  int64_t max_bytes = int64_t{64} << 20;
  bool worker = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--repetitions=", 14) == 0) repetitions = std::atoi(argv[i] + 14);
    else if (std::strncmp(argv[i], "--max-bytes=", 12) == 0) max_bytes = std::atoll(argv[i] + 12);
    else if (std::strcmp(argv[i], "--rank-worker") == 0) worker = true;
  }
  if (worker) return rank_worker(repetitions, max_bytes);

  std::string self = argv[0], args = " --repetitions=" + std::to_string(repetitions) + " --max-bytes=" + std::to_string(max_bytes);
  char gloo_dir[] = "/tmp/ember_bench_gloo_XXXXXX";
  if (!::mkdtemp(gloo_dir)) return 1;
  std::string ranks = "EMBER_BENCH_GLOO_DIR=" + std::string(gloo_dir) + " " + std::string(EMBER_RUN_PATH) +
                      " --nproc-per-node=2 " + self + " --rank-worker" + args;
  auto ours = collect(ranks);
  auto& ember_times = ours["ember"];
  auto& gloo_times = ours["gloo"];
  std::string torch_command = "/usr/bin/python3 " + std::string(EMBER_BENCH_SOURCE_DIR) + "/allreduce_torch.py " +
                              std::to_string(free_port()) + " " + std::to_string(repetitions);
  for (int64_t b : sizes(max_bytes)) torch_command += " " + std::to_string(b);
  auto torch_times = collect(torch_command + " 2>/dev/null")["torch"];

  std::printf("2-rank all_reduce (float32 SUM, gloo, loopback), best of %d repetitions\n", repetitions);
  std::printf("%-8s %10s %10s %10s %12s %12s %11s %11s\n", "size", "ember us", "torch us", "gloo us", "ember/torch",
              "ember/gloo", "ember GB/s", "torch GB/s");
  for (int64_t b : sizes(max_bytes)) {
    double e = ember_times.count(b) ? ember_times[b] : 0, t = torch_times.count(b) ? torch_times[b] : 0;
    double g = gloo_times.count(b) ? gloo_times[b] : 0;
    auto busbw = [&](double us) { return us > 0 ? static_cast<double>(b) / (us * 1e3) : 0.0; };  // 2(n-1)/n = 1
    std::printf("%-8s %10.1f %10.1f %10.1f %12.2f %12.2f %11.3f %11.3f\n", human(b).c_str(), e, t, g, t > 0 ? e / t : 0.0,
                g > 0 ? e / g : 0.0, busbw(e), busbw(t));
  }
  std::filesystem::remove_all(gloo_dir);
  return ember_times.empty() ? 1 : 0;
}
