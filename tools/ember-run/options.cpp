#include "options.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace ember::run {
namespace {

/// An int, whole and in range: "4294967298" is refused rather than wrapped to 2.
int to_int(const std::string& name, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0') throw std::invalid_argument("--" + name + " expects an integer, got '" + value + "'");
  if (errno == ERANGE || v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw std::invalid_argument("--" + name + "=" + value + " is out of range (at most " +
                                std::to_string(std::numeric_limits<int>::max()) + ")");
  }
  return static_cast<int>(v);
}

std::string normalize(std::string name) {
  for (char& c : name) {
    if (c == '_') c = '-';
  }
  return name;
}

/// An IPv6 address may be given in brackets as in a URL ([::1]); MASTER_ADDR gets it bare
/// (::1), the form getaddrinfo resolves.
std::string bare_host(const std::string& host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

}  // namespace

const char* usage() {
  return "usage: ember-run [--nproc-per-node=N] [--nnodes=M] [--node-rank=R] [--master-addr=ADDR]\n"
         "                 [--master-port=PORT] [--term-timeout=SECONDS] [--standalone] program [args...]\n"
         "Starts N processes of `program` on this node, one per rank, with torchrun's environment:\n"
         "RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT.\n"
         "ADDR is a host name, an IPv4 or an IPv6 address (::1 or [::1]; MASTER_ADDR gets it bare).\n"
         "Node 0 serves the ranks' TCPStore on MASTER_PORT (29500 with --nnodes > 1; a free port on one\n"
         "node unless --master-port is given). When a rank fails, the others get SIGTERM (SIGKILL after\n"
         "--term-timeout seconds, default 30) and ember-run exits non-zero naming the rank.\n"
         "SIGINT and SIGTERM are forwarded to every rank.\n";
}

Options parse_options(int argc, char** argv) {
  Options options;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.rfind("--", 0) != 0) break;  // the program
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    name = normalize(name);
    if (name == "help") throw std::invalid_argument("");
    if (name == "standalone") {
      options.nnodes = 1;
      continue;
    }
    bool known = name == "nproc-per-node" || name == "nnodes" || name == "node-rank" || name == "master-addr" ||
                 name == "master-port" || name == "term-timeout";
    if (!known) throw std::invalid_argument("unknown option " + arg);
    if (!has_value) {
      if (i + 1 >= argc) throw std::invalid_argument("option --" + name + " needs a value");
      value = argv[++i];
    }
    if (name == "nproc-per-node") options.nproc_per_node = to_int(name, value);
    else if (name == "nnodes") options.nnodes = to_int(name, value);
    else if (name == "node-rank") options.node_rank = to_int(name, value);
    else if (name == "master-addr") options.master_addr = bare_host(value);
    else if (name == "master-port") options.master_port = to_int(name, value);
    else options.term_timeout_s = to_int(name, value);
  }
  for (; i < argc; ++i) options.command.emplace_back(argv[i]);
  if (options.command.empty()) throw std::invalid_argument("no program to run");
  if (options.nproc_per_node < 1) throw std::invalid_argument("--nproc-per-node must be at least 1");
  if (options.nnodes < 1) throw std::invalid_argument("--nnodes must be at least 1");
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    throw std::invalid_argument("--node-rank must be in [0, " + std::to_string(options.nnodes) + ")");
  }
  if (options.master_port && (*options.master_port < 0 || *options.master_port > 65535)) {
    throw std::invalid_argument("--master-port must be in [0, 65535]");
  }
  if (options.term_timeout_s < 0) throw std::invalid_argument("--term-timeout must not be negative");
  if (!options.master_port && options.nnodes > 1) options.master_port = 29500;
  return options;
}

}  // namespace ember::run
