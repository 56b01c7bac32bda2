// Console reporter shared by the benchmarks that time ember beside a peer in the same run:
// every benchmark named ember_X with a peer named torch_X gets one line with their ratio.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

class PeerRatioReporter : public benchmark::ConsoleReporter {
 public:
  /// `title` heads the ratio table; with `throughput`, the ratio is torch's time over
  /// ember's (> 1 means ember is faster), else ember's over torch's (< 1 means faster).
  explicit PeerRatioReporter(std::string title, bool throughput = false)
      : title_(std::move(title)), throughput_(throughput) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && run.iterations > 0)
        times_[run.benchmark_name()] = run.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\n%s\n", title_.c_str());
    for (const auto& [name, t] : times_) {
      if (name.rfind("ember_", 0) != 0) continue;
      auto peer = times_.find("torch_" + name.substr(6));
      if (peer != times_.end())
        std::printf("  %-28s %6.2f\n", name.substr(6).c_str(), throughput_ ? peer->second / t : t / peer->second);
    }
    print_more();
  }

 protected:
  /// Real time per iteration of each benchmark run, by name.
  const std::map<std::string, double>& times() const { return times_; }
  /// Lines a benchmark adds after the ratio table.
  virtual void print_more() const {}

 private:
  std::string title_;
  bool throughput_;
  std::map<std::string, double> times_;
};

/// The main() of a benchmark timed beside LibTorch: BENCHMARK_MAIN's, with the ratio table
/// (ember / torch, real time) after the runs.
#define EMBER_PEER_BENCHMARK_MAIN()                                                     \
  int main(int argc, char** argv) {                                                     \
    benchmark::Initialize(&argc, argv);                                                 \
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;                   \
    PeerRatioReporter reporter("ember / torch (real time; < 1 means ember is faster)"); \
    benchmark::RunSpecifiedBenchmarks(&reporter);                                       \
    benchmark::Shutdown();                                                              \
    return 0;                                                                           \
  }
