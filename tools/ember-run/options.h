// ember-run's command line: torchrun's options, in its --dash-case and --snake_case forms.
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
  std::optional<int> master_port;  // unset on one node: a free port is chosen
  int term_timeout_s = 30;         // after SIGTERM, how long ranks get before SIGKILL
  std::vector<std::string> command;  // the program and its arguments
};

/// Parses argv; throws std::invalid_argument with a message for the user.
Options parse_options(int argc, char** argv);
/// The usage text.
const char* usage();

}  // namespace ember::run
