#include "launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "worker_env.h"

extern char** environ;

namespace ember::run {
namespace {

using Clock = std::chrono::steady_clock;

struct Rank {
  int rank;
  int local_rank;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

pid_t start(const Options& options, const Rank& rank, int master_port, const sigset_t& original_mask, int attempt,
            const AttemptLogs& logs) {
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", std::to_string(rank.rank)},
      {"LOCAL_RANK", std::to_string(rank.local_rank)},
      {"WORLD_SIZE", std::to_string(options.nnodes * options.nproc_per_node)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
      {"EMBER_USE_AGENT_STORE", "1"},
  };
  for (auto& v : elastic_vars(options, rank.rank, attempt, logs.error_file(rank.local_rank))) vars.push_back(v);
  const int out = logs.child_fd(rank.local_rank, 1), err = logs.child_fd(rank.local_rank, 2);
  const pid_t launcher = ::getpid();
  // Build argv and envp before fork: the child only calls async-signal-safe functions.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    bool replaced = false;
    for (const auto& [name, value] : vars) replaced = replaced || entry.rfind(name + "=", 0) == 0;
    if (!replaced) env_strings.push_back(entry);
  }
  for (const auto& [name, value] : vars) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.command;
  if (!options.use_env) args.push_back("--local-rank=" + std::to_string(rank.local_rank));
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid == 0) {
    // Die with the launcher; if it died before prctl, the parent is another process now.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher) ::_exit(127);
    if (out >= 0) ::dup2(out, 1);
    if (err >= 0) ::dup2(err, 2);
    ::pthread_sigmask(SIG_SETMASK, &original_mask, nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    const char* text = "ember-run: cannot execute the program\n";
    (void)!::write(2, text, std::strlen(text));
    ::_exit(127);
  }
  return pid;
}

}  // namespace

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

namespace {

int exit_code(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

void signal_all(std::vector<Rank>& ranks, int sig) {
  for (auto& r : ranks) {
    if (r.running) ::kill(r.pid, sig);
  }
}

}  // namespace

GroupResult run_group(const Options& options, int master_port, int attempt, AttemptLogs& logs) {
  sigset_t waited, original;
  sigemptyset(&waited);
  for (int s : {SIGCHLD, SIGINT, SIGTERM}) sigaddset(&waited, s);
  ::pthread_sigmask(SIG_BLOCK, &waited, &original);
  sigset_t child_mask = original;  // what main() blocked must not stay blocked in the ranks
  for (int s : {SIGCHLD, SIGINT, SIGTERM}) sigdelset(&child_mask, s);

  std::vector<Rank> ranks;
  for (int local = 0; local < options.nproc_per_node; ++local) {
    Rank r{options.node_rank * options.nproc_per_node + local, local};
    r.pid = start(options, r, master_port, child_mask, attempt, logs);
    if (r.pid < 0) {
      std::fprintf(stderr, "ember-run: fork failed: %s\n", std::strerror(errno));
      signal_all(ranks, SIGKILL);
      for (auto& started : ranks) ::waitpid(started.pid, nullptr, 0);
      return {GroupResult::kFailed, 1};
    }
    r.running = true;
    ranks.push_back(r);
  }
  logs.start_copying();

  const Rank* first_failure = nullptr;
  int interrupted_by = 0;
  bool stopping = false;
  Clock::time_point kill_at{};
  auto running = [&] {
    for (const auto& r : ranks) {
      if (r.running) return true;
    }
    return false;
  };
  auto stop_others = [&](int sig) {
    if (!stopping) kill_at = Clock::now() + std::chrono::seconds(options.term_timeout_s);
    stopping = true;
    signal_all(ranks, sig);
  };
  while (running()) {
    const auto tick_ns = static_cast<long>(options.monitor_interval_s * 1e9);
    timespec tick{tick_ns / 1'000'000'000, tick_ns % 1'000'000'000};
    int sig = ::sigtimedwait(&waited, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      if (!interrupted_by) interrupted_by = sig;
      stop_others(sig);
    }
    // Reap every rank that has ended. Ranks that end in the same batch are taken as
    // simultaneous; among them a rank killed by a signal is named before one that exited
    // with an error, since survivors of a crash exit with errors right after it.
    const Rank* failed_now = nullptr;
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto& r : ranks) {
        if (r.pid != pid || !r.running) continue;
        r.running = false;
        r.status = status;
        bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (failed && (!failed_now || (WIFSIGNALED(status) && !WIFSIGNALED(failed_now->status)))) failed_now = &r;
      }
    }
    if (failed_now && !first_failure && !interrupted_by) {
      first_failure = failed_now;
      std::fprintf(stderr, "ember-run: rank %d (local_rank %d, pid %d) %s; stopping the other ranks\n",
                   failed_now->rank, failed_now->local_rank, static_cast<int>(failed_now->pid),
                   describe(failed_now->status).c_str());
      stop_others(SIGTERM);
    }
    if (stopping && Clock::now() >= kill_at) signal_all(ranks, SIGKILL);
  }
  logs.finish();
  if (interrupted_by) return {GroupResult::kInterrupted, 128 + interrupted_by, -1, -1, -1, 0, interrupted_by};
  if (first_failure) {
    return {GroupResult::kFailed, exit_code(first_failure->status),
            first_failure->rank,  first_failure->local_rank,
            first_failure->pid,   first_failure->status};
  }
  return {};
}

}  // namespace ember::run
