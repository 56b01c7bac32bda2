// Gloo process groups with their ranks as threads of this process, meeting in an
// in-process TCPStore (as test_process_group_gloo.cpp's ranks do).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/process_group.h"
#include "ember/ember.h"

namespace ember::testing {

/// Runs `body(group)` on `world` threads, one rank each, meeting at 127.0.0.1.
template <typename Body>
void on_gloo_ranks(int world, Body body) {
  using namespace std::chrono_literals;
  auto master = std::make_shared<distributed::TCPStore>("127.0.0.1", 0, world, true, 20s);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      auto store =
          r == 0 ? master : std::make_shared<distributed::TCPStore>("127.0.0.1", master->port(), world, false, 20s);
      detail::distributed::GroupSetup setup;
      setup.store = store;
      setup.local_address = store->local_address();
      setup.prefix = "test/";
      setup.rank = r;
      setup.world_size = world;
      setup.timeout = 20s;
      auto group = detail::distributed::make_gloo_group(setup);
      body(*group);
    });
  }
  for (auto& t : ranks) t.join();
}

}  // namespace ember::testing
