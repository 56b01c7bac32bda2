// The job: attempts of the worker group (--max-restarts), and the failure report.
//
// Note [Restarting the worker group]
// As torchrun's agent: when a rank fails, the whole group is stopped (launcher.cpp), and
// while restarts are left the group is started again; TORCHELASTIC_RESTART_COUNT counts
// the attempts (0 first) and each attempt has its own log directory attempt_K. An
// interrupted job (SIGINT, SIGTERM to ember-run) is not restarted. The store the ranks
// rendezvous in is replaced by an empty one, so an attempt never sees the keys of the one
// before it (torchrun's workers prefix theirs with the attempt instead; ember's ranks do
// not). With several nodes a restart would have to be agreed by every node's launcher,
// which ember-run's static rendezvous does not do, so --max-restarts needs --nnodes=1.
// After the last attempt the first failed rank is named, and the error file it wrote
// (Note [Error file] in src/core/error_file.cpp) is printed, as torchrun's "Root Cause".
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "launcher.h"

namespace ember::run {
namespace {

/// The traceback of a torchrun error file: message.extraInfo.py_callstack, else
/// message.message, else the message as written; empty when there is no readable file.
std::string error_file_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  auto json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.contains("message")) return text.str();
  const auto& message = json["message"];
  if (message.is_string()) return message.get<std::string>();
  if (message.is_object()) {
    if (message.contains("extraInfo") && message["extraInfo"].contains("py_callstack") &&
        message["extraInfo"]["py_callstack"].is_string()) {
      return message["extraInfo"]["py_callstack"].get<std::string>();
    }
    if (message.contains("message") && message["message"].is_string()) return message["message"].get<std::string>();
  }
  return text.str();
}

void report_failure(const GroupResult& result, const AttemptLogs& logs) {
  std::fprintf(stderr, "ember-run: failed: rank %d (local_rank %d) %s\n", result.rank, result.local_rank,
               describe(result.status).c_str());
  std::string path = logs.error_file(result.local_rank);
  std::string text = error_file_text(path);
  if (!text.empty()) {
    if (text.back() != '\n') text += '\n';
    std::fprintf(stderr, "ember-run: rank %d's error file %s:\n%s", result.rank, path.c_str(), text.c_str());
  }
}

}  // namespace

int launch(const Options& options, int master_port, const std::function<int()>& fresh_store) {
  if (options.max_restarts > 0 && options.nnodes > 1) {
    std::fprintf(stderr,
                 "ember-run: --max-restarts needs --nnodes=1: the launchers of several nodes do not agree on "
                 "restarts (Note [Restarting the worker group])\n");
    return 2;
  }
  try {
    RunLogDir dir(options);
    for (int attempt = 0;; ++attempt) {
      AttemptLogs logs(options, dir, attempt);
      GroupResult result = run_group(options, master_port, attempt, logs);
      if (result.kind == GroupResult::kSucceeded) return 0;
      if (result.kind == GroupResult::kInterrupted) {
        std::fprintf(stderr, "ember-run: received signal %d (%s); forwarded it to every rank\n", result.signal,
                     strsignal(result.signal));
        return result.exit_code;
      }
      if (result.rank < 0 || attempt >= options.max_restarts) {
        if (result.rank >= 0) report_failure(result, logs);
        return result.exit_code;
      }
      std::fprintf(stderr, "ember-run: rank %d (local_rank %d) %s; restarting the worker group (restart %d of %d)\n",
                   result.rank, result.local_rank, describe(result.status).c_str(), attempt + 1, options.max_restarts);
      if (fresh_store) master_port = fresh_store();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-run: %s\n", e.what());
    return 1;
  }
}

}  // namespace ember::run
