#include "options.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "ember/cuda.h"

namespace ember::run {
namespace {

/// An int, whole and in range: "4294967298" is refused rather than wrapped to 2.
int to_int(const std::string& name, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0')
    throw std::invalid_argument("--" + name + " expects an integer, got '" + value + "'");
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

struct Spec {
  const char* name;  // dash-case
  char short_name;   // 0: none
  bool flag;         // takes no value
};
constexpr Spec kSpecs[] = {
    {"nproc-per-node", 0, false}, {"nnodes", 0, false},        {"node-rank", 0, false},
    {"master-addr", 0, false},    {"master-port", 0, false},   {"term-timeout", 0, false},
    {"rdzv-backend", 0, false},   {"rdzv-endpoint", 0, false}, {"rdzv-id", 0, false},
    {"role", 0, false},           {"max-restarts", 0, false},  {"monitor-interval", 0, false},
    {"log-dir", 0, false},        {"redirects", 'r', false},   {"tee", 't', false},
    {"standalone", 0, true},      {"module", 'm', true},       {"no-python", 0, true},
    {"use-env", 0, true},         {"help", 'h', true},
};

const Spec* find_spec(const std::string& name, char short_name) {
  for (const auto& s : kSpecs) {
    if (short_name ? s.short_name == short_name : name == s.name) return &s;
  }
  return nullptr;
}

/// torchrun's environment default of an option: PET_ and its name in upper snake case.
std::string pet_name(const std::string& name) {
  std::string out = "PET_";
  for (char c : name) out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

/// torchrun's Std values for --redirects/--tee: "N" for every local rank or
/// "LOCAL:N,LOCAL:N" (ranks not named get 0); N in 0..3 (1 stdout, 2 stderr, 3 both).
std::vector<int> std_masks(const std::string& name, const std::string& value, int nproc) {
  auto bad = [&] {
    return std::invalid_argument("--" + name + "=" + value + " does not match N or LOCAL_RANK:N,... with N in 0..3");
  };
  auto mask = [&](const std::string& v) {
    if (v.size() != 1 || v[0] < '0' || v[0] > '3') throw bad();
    return v[0] - '0';
  };
  if (value.find(':') == std::string::npos) return std::vector<int>(static_cast<size_t>(nproc), mask(value));
  std::vector<int> out(static_cast<size_t>(nproc), 0);
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    std::string item = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0) throw bad();
    std::string rank = item.substr(0, colon);
    if (rank.find_first_not_of("0123456789") != std::string::npos) throw bad();
    int local = to_int(name, rank);
    int m = mask(item.substr(colon + 1));
    if (local < nproc) out[static_cast<size_t>(local)] = m;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

/// torchrun's --nproc-per-node: a number, or auto (the GPUs if CUDA is available, else
/// the CPUs), cpu, gpu (an error without CUDA).
int nproc_from(const std::string& value) {
  if (value == "cpu" || (value == "auto" && !ember::cuda::is_available())) {
    unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
  }
  if (value == "gpu" || value == "auto") {
    if (!ember::cuda::is_available()) throw std::invalid_argument("--nproc-per-node=gpu: Cuda is not available.");
    return ember::cuda::device_count();
  }
  if (!value.empty() && value.find_first_not_of("-0123456789") != std::string::npos) {
    throw std::invalid_argument("Unsupported nproc_per_node value: " + value + " (a number, auto, cpu or gpu)");
  }
  return to_int("nproc-per-node", value);
}

/// A fixed number of nodes: N, or MIN:MAX with MIN == MAX.
int nnodes_from(const std::string& value) {
  size_t colon = value.find(':');
  if (colon == std::string::npos) return to_int("nnodes", value);
  if (value.find(':', colon + 1) != std::string::npos) {
    throw std::invalid_argument("nnodes=" + value + " is not in \"MIN:MAX\" format");
  }
  int min = to_int("nnodes", value.substr(0, colon)), max = to_int("nnodes", value.substr(colon + 1));
  if (min != max) {
    throw std::invalid_argument("--nnodes=" + value +
                                ": ember-run does not run elastic jobs (a range of node counts); give a fixed "
                                "number, --nnodes=N or --nnodes=N:N");
  }
  return min;
}

/// host[:port], [IPv6]:port or [IPv6]; the port is `default_port` when absent.
std::pair<std::string, int> endpoint_from(const std::string& value, int default_port) {
  std::string host = value, port;
  if (!value.empty() && value.front() == '[') {
    size_t close = value.find(']');
    if (close == std::string::npos) throw std::invalid_argument("--rdzv-endpoint=" + value + " has no closing ']'");
    host = value.substr(1, close - 1);
    if (close + 1 < value.size()) {
      if (value[close + 1] != ':') throw std::invalid_argument("--rdzv-endpoint=" + value + " is not host:port");
      port = value.substr(close + 2);
    }
  } else if (size_t colon = value.rfind(':'); colon != std::string::npos && value.find(':') == colon) {
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
  }
  if (host.empty()) host = "localhost";
  int p = port.empty() ? default_port : to_int("rdzv-endpoint", port);
  if (p < 0 || p > 65535) throw std::invalid_argument("--rdzv-endpoint's port must be in [0, 65535]");
  return {host, p};
}

}  // namespace

std::string random_run_id() {
  std::random_device random;
  char text[40];
  std::snprintf(text, sizeof(text), "%08x-%04x-%04x-%04x-%08x%04x", random(), random() & 0xffff, random() & 0xffff,
                random() & 0xffff, random(), random() & 0xffff);
  return text;
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

const char* usage() {
  return "usage: ember-run [-h] [--nproc-per-node=N|auto|cpu|gpu] [--nnodes=M|M:M] [--node-rank=R]\n"
         "                 [--master-addr=ADDR] [--master-port=PORT] [--standalone]\n"
         "                 [--rdzv-backend=static|c10d] [--rdzv-endpoint=HOST[:PORT]] [--rdzv-id=ID]\n"
         "                 [--role=NAME] [--max-restarts=K] [--monitor-interval=SECONDS]\n"
         "                 [--log-dir=DIR] [-r|--redirects=SPEC] [-t|--tee=SPEC] [--term-timeout=SECONDS]\n"
         "                 [-m|--module] [--no-python] [--use-env] program [args...]\n"
         "Starts N processes of `program` on this node, one per rank, with torchrun's environment:\n"
         "RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK,\n"
         "ROLE_NAME, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID (--rdzv-id),\n"
         "TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_ERROR_FILE, and\n"
         "OMP_NUM_THREADS=1 with several ranks unless it is set. Options take their defaults from\n"
         "PET_<OPTION> variables (PET_NPROC_PER_NODE=2), as torchrun's.\n"
         "The program is executed as given; a program ending in .py runs as `python3 -u program`\n"
         "($PYTHON_EXEC for python3), -m runs `python3 -u -m module`, --no-python executes it as given.\n"
         "ADDR is a host name, an IPv4 or an IPv6 address (::1 or [::1]; MASTER_ADDR gets it bare).\n"
         "Node 0 serves the ranks' TCPStore on MASTER_PORT (29500 with --nnodes > 1; a free port on one\n"
         "node unless --master-port is given); --rdzv-endpoint names it instead. c10d runs one node\n"
         "(its endpoint's port defaults to 29400). Elastic ranges (--nnodes=1:4) are refused.\n"
         "When a rank fails, the others get SIGTERM (SIGKILL after --term-timeout seconds, default 30);\n"
         "with --max-restarts=K the whole group is started again, at most K times, else ember-run exits\n"
         "non-zero naming the rank and printing the error file it wrote. SIGINT and SIGTERM are\n"
         "forwarded to every rank; ranks are killed if ember-run dies. --redirects/--tee SPEC: 0 none,\n"
         "1 stdout, 2 stderr, 3 both, or per local rank (0:1,1:2), into\n"
         "LOG_DIR/RUN_ID_xxxx/attempt_K/LOCAL_RANK/{stdout,stderr}.log; --tee also prints each line\n"
         "prefixed [ROLE_NAMELOCAL_RANK]: ([default0]:). Without --log-dir the files go to a temporary directory that\n"
         "is removed when ember-run exits.\n"
         "Run as ember-launch (installed beside it), it keeps torch.distributed.launch's contract: each rank\n"
         "also gets --local-rank=LOCAL_RANK appended to its arguments unless --use-env (--use_env) is given;\n"
         "as ember-run it passes the environment only, with or without --use-env.\n";
}

Options parse_options(int argc, char** argv) {
  std::map<std::string, std::string> values;  // option name -> its text
  std::set<std::string> flags, from_env;
  for (const auto& spec : kSpecs) {
    if (std::string(spec.name) == "help") continue;
    const char* env = std::getenv(pet_name(spec.name).c_str());
    if (!env || !*env) continue;
    from_env.insert(spec.name);
    if (!spec.flag) {
      values[spec.name] = env;
    } else if (std::string text = env; text.find_first_not_of("-0123456789") != std::string::npos) {
      throw std::invalid_argument(pet_name(spec.name) + " expects an integer (0 or 1), got '" + text + "'");
    } else if (to_int(spec.name, text) != 0) {
      flags.insert(spec.name);
    }
  }
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program
    std::string name, value;
    bool has_value = false;
    const Spec* spec = nullptr;
    if (arg[1] == '-') {
      name = arg.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      name = normalize(name);
      spec = find_spec(name, 0);
    } else {  // -h, -m, -r 3, -r3, -t 3
      spec = find_spec("", arg[1]);
      if (spec && arg.size() > 2) {
        if (spec->flag) throw std::invalid_argument("option -" + std::string(1, arg[1]) + " takes no value");
        value = arg.substr(2);
        has_value = true;
      }
    }
    if (!spec) throw std::invalid_argument("unknown option " + arg);
    name = spec->name;
    if (name == "help") throw std::invalid_argument("");
    from_env.erase(name);
    if (spec->flag) {
      if (has_value) throw std::invalid_argument("option --" + name + " takes no value");
      flags.insert(name);
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) throw std::invalid_argument("option --" + name + " needs a value");
      value = argv[++i];
    }
    values[name] = value;
  }

  Options options;
  auto take = [&](const std::string& name, auto convert) {
    auto it = values.find(name);
    if (it == values.end()) return;
    try {
      convert(it->second);
    } catch (const std::invalid_argument& e) {
      if (from_env.count(name)) throw std::invalid_argument(pet_name(name) + "=" + it->second + ": " + e.what());
      throw;
    }
  };
  take("nproc-per-node", [&](const std::string& v) { options.nproc_per_node = nproc_from(v); });
  take("nnodes", [&](const std::string& v) { options.nnodes = nnodes_from(v); });
  take("node-rank", [&](const std::string& v) { options.node_rank = to_int("node-rank", v); });
  take("master-addr", [&](const std::string& v) { options.master_addr = bare_host(v); });
  take("master-port", [&](const std::string& v) { options.master_port = to_int("master-port", v); });
  take("term-timeout", [&](const std::string& v) { options.term_timeout_s = to_int("term-timeout", v); });
  take("rdzv-backend", [&](const std::string& v) { options.rdzv_backend = v; });
  take("rdzv-id", [&](const std::string& v) { options.rdzv_id = v; });
  take("role", [&](const std::string& v) { options.role = v; });
  take("max-restarts", [&](const std::string& v) { options.max_restarts = to_int("max-restarts", v); });
  take("monitor-interval", [&](const std::string& v) {
    char* end = nullptr;
    options.monitor_interval_s = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(options.monitor_interval_s > 0) || options.monitor_interval_s > 3600) {
      throw std::invalid_argument("--monitor-interval expects seconds in (0, 3600], got '" + v + "'");
    }
  });
  take("log-dir", [&](const std::string& v) { options.log_dir = v; });

  for (; i < argc; ++i) options.command.emplace_back(argv[i]);
  if (options.command.empty()) throw std::invalid_argument("no program to run");
  if (options.nproc_per_node < 1) throw std::invalid_argument("--nproc-per-node must be at least 1");
  take("redirects",
       [&](const std::string& v) { options.redirects = std_masks("redirects", v, options.nproc_per_node); });
  take("tee", [&](const std::string& v) { options.tee = std_masks("tee", v, options.nproc_per_node); });
  options.redirects.resize(static_cast<size_t>(options.nproc_per_node), 0);
  options.tee.resize(static_cast<size_t>(options.nproc_per_node), 0);
  if (options.max_restarts < 0) throw std::invalid_argument("--max-restarts must not be negative");

  const bool standalone = flags.count("standalone") > 0;
  if (standalone) {  // torchrun 2.x: c10d on a free local port with a fresh run id; given rdzv values are ignored
    options.nnodes = 1;
    options.rdzv_backend = "c10d";
    options.rdzv_id = random_run_id();
  }
  if (options.rdzv_backend != "static" && options.rdzv_backend != "c10d") {
    throw std::invalid_argument("--rdzv-backend must be static or c10d, got '" + options.rdzv_backend + "'");
  }
  if (options.nnodes < 1) throw std::invalid_argument("--nnodes must be at least 1");
  if (options.rdzv_backend == "c10d" && options.nnodes > 1) {
    throw std::invalid_argument(
        "--rdzv-backend=c10d: ember-run runs a c10d rendezvous on one node only; for several nodes use "
        "--rdzv-backend=static with --node-rank on each node");
  }
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    throw std::invalid_argument("--node-rank must be in [0, " + std::to_string(options.nnodes) + ")");
  }
  if (options.master_port && (*options.master_port < 0 || *options.master_port > 65535)) {
    throw std::invalid_argument("--master-port must be in [0, 65535]");
  }
  if (options.term_timeout_s < 0) throw std::invalid_argument("--term-timeout must not be negative");
  // The store's address: the rendezvous endpoint when one is given (c10d's default port
  // is 29400, as torchrun's), else MASTER_ADDR and MASTER_PORT.
  if (!standalone)
    take("rdzv-endpoint", [&](const std::string& v) {
      auto [host, port] =
          endpoint_from(v, options.rdzv_backend == "c10d" ? 29400 : options.master_port.value_or(29500));
      options.master_addr = host;
      options.master_port = port;
    });
  if (!options.master_port && options.nnodes > 1) options.master_port = 29500;

  // Invoked as ember-launch: the spec's torch.distributed.launch contract (--local-rank=N
  // appended unless --use-env); as ember-run, torchrun's (the environment only, --use-env or not).
  const std::string invoked = argc > 0 ? argv[0] : "";
  const bool legacy = invoked.size() >= 12 && invoked.compare(invoked.size() - 12, 12, "ember-launch") == 0;
  options.use_env = !legacy || flags.count("use-env") > 0;

  bool module = flags.count("module"), no_python = flags.count("no-python");
  if (module && no_python) {
    throw std::invalid_argument("Don't use both the '--no-python' flag and the '--module' flag at the same time.");
  }
  if (module || (!no_python && ends_with(options.command[0], ".py"))) {
    const char* python = std::getenv("PYTHON_EXEC");
    std::vector<std::string> head = {python && *python ? python : "python3", "-u"};
    if (module) head.emplace_back("-m");
    options.command.insert(options.command.begin(), head.begin(), head.end());
  }
  return options;
}

}  // namespace ember::run
