// ember-run's command line: torchrun's options, in its --dash-case and --snake_case forms,
// its short options (-h, -m, -r, -t) and its PET_* environment defaults.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ember::run {

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";  // a host name, an IPv4 or an IPv6 address (no brackets)
  std::optional<int> master_port;         // unset on one node: a free port is chosen
  int term_timeout_s = 30;                // after SIGTERM, how long ranks get before SIGKILL
  std::string rdzv_backend = "static";    // static or c10d (one node)
  std::string rdzv_id = "none";           // TORCHELASTIC_RUN_ID, as torchrun's default
  std::string role = "default";           // ROLE_NAME
  int max_restarts = 0;                   // restarts of the whole worker group after a failure
  double monitor_interval_s = 0.1;        // how often the launcher looks at its ranks (torchrun 2.x)
  std::optional<std::string> log_dir;     // unset: a temporary directory, removed at exit
  std::vector<int> redirects;             // per local rank: 1 stdout, 2 stderr, 3 both to log files
  std::vector<int> tee;                   // per local rank: as redirects, and copied to the console
  std::vector<std::string> command;       // what each rank executes (python3 -u prepended for -m and .py)
  // Only the environment (torchrun's way, ember-run's). False under the legacy launcher's name,
  // ember-launch, without --use-env: each rank also gets --local-rank=N appended to its
  // arguments, as torch.distributed.launch passed it.
  bool use_env = true;
};

/// Parses argv (PET_* variables give the defaults); throws std::invalid_argument with a
/// message for the user (an empty message: -h or --help was given).
Options parse_options(int argc, char** argv);
/// A fresh run id (a random UUID), as torchrun --standalone makes.
std::string random_run_id();
/// The usage text.
const char* usage();

}  // namespace ember::run
