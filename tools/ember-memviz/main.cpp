// ember-memviz SNAPSHOT.json -o PAGE.html
//
// Turns a memory snapshot (ember::cuda::memory_snapshot_json(), or PyTorch's
// torch.cuda.memory._snapshot() dumped as JSON) into one self-contained HTML page: the
// allocated-memory timeline of the recorded history, the segments and their blocks, and
// the top allocation sites. Exit status: 0; 1 when the snapshot cannot be read or the
// page cannot be written; 2 on a bad command line.
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "page.h"
#include "snapshot.h"
#include "view.h"

namespace {

constexpr const char* kUsage =
    "usage: ember-memviz SNAPSHOT.json -o PAGE.html\n"
    "Writes one self-contained HTML page (no network access) showing the snapshot's\n"
    "allocation timeline, segments and blocks, and top allocation sites.\n";

int usage_error(const std::string& message) {
  std::cerr << "ember-memviz: " << message << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string input, output;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "-o" || arg == "--output") {
      if (i + 1 >= argc) return usage_error(arg + " needs a file name");
      output = argv[++i];
    } else if (!arg.empty() && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else if (input.empty()) {
      input = arg;
    } else {
      return usage_error("more than one snapshot given ('" + input + "', '" + arg + "')");
    }
  }
  if (input.empty()) return usage_error("no snapshot given");
  if (output.empty()) return usage_error("no output page given (-o PAGE.html)");

  const auto start = std::chrono::steady_clock::now();
  std::ifstream in(input, std::ios::binary);
  if (!in) {
    std::cerr << "ember-memviz: cannot open '" << input << "': " << std::strerror(errno) << "\n";
    return 1;
  }
  std::string page;
  ember::memviz::Snapshot snapshot;
  try {
    snapshot = ember::memviz::read_snapshot(in);
    nlohmann::json view = ember::memviz::build_view(snapshot, ember::memviz::ViewOptions{});
    view["source"] = std::filesystem::path(input).filename().string();
    page = ember::memviz::render_page(view);
  } catch (const std::exception& error) {
    std::cerr << "ember-memviz: " << input << ": " << error.what() << "\n";
    return 1;
  }
  std::ofstream out(output, std::ios::binary | std::ios::trunc);
  out << page;
  out.close();
  if (!out) {
    std::cerr << "ember-memviz: cannot write '" << output << "'\n";
    return 1;
  }
  size_t entries = 0;
  for (const auto& trace : snapshot.device_traces) entries += trace.size();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "ember-memviz: wrote " << output << " (" << page.size() << " bytes): " << snapshot.segments.size()
            << " segments, " << entries << " trace entries, in " << seconds << " s\n";
  return 0;
}
