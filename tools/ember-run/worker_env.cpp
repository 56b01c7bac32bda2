#include "worker_env.h"

#include <cstdlib>

namespace ember::run {

std::vector<std::pair<std::string, std::string>> elastic_vars(const Options& options, int rank, int attempt,
                                                              const std::string& error_file) {
  // One role per job: a rank's role rank and role world size are its rank and the world.
  const int world_size = options.nnodes * options.nproc_per_node;
  std::vector<std::pair<std::string, std::string>> vars = {
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_NAME", options.role},
      {"ROLE_WORLD_SIZE", std::to_string(world_size)},
      {"GROUP_WORLD_SIZE", std::to_string(options.nnodes)},
      {"TORCHELASTIC_RUN_ID", options.rdzv_id},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(options.max_restarts)},
      {"TORCHELASTIC_ERROR_FILE", error_file},
  };
  if (options.nproc_per_node > 1 && !std::getenv("OMP_NUM_THREADS")) vars.emplace_back("OMP_NUM_THREADS", "1");
  return vars;
}

}  // namespace ember::run
