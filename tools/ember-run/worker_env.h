// torchrun's elastic variables for a rank, beside RANK, LOCAL_RANK, WORLD_SIZE and the
// store's address (launcher.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "options.h"

namespace ember::run {

/// ROLE_RANK, ROLE_NAME, ROLE_WORLD_SIZE, GROUP_WORLD_SIZE, TORCHELASTIC_RUN_ID,
/// TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_ERROR_FILE, and
/// OMP_NUM_THREADS=1 when several ranks share the node and it is not set (torchrun's
/// default, so that ranks' thread pools do not oversubscribe the cores).
std::vector<std::pair<std::string, std::string>> elastic_vars(const Options& options, int rank, int attempt,
                                                              const std::string& error_file);

}  // namespace ember::run
