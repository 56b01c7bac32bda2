// What the "gloo" backend needs from its surroundings before its first collective: Gloo's
// rendezvous over ember's store, and a process that survives a dead peer's socket.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "ember/distributed.h"

namespace ember::detail::distributed {

/// Gloo writes to its sockets without MSG_NOSIGNAL: a peer that dies would otherwise kill
/// this process with SIGPIPE instead of failing the collective with an error (Python,
/// and so PyTorch, ignores SIGPIPE from the start). A handler the program installed stays.
void ignore_sigpipe_unless_handled();

/// Gloo's rendezvous reads and writes ember's store under the group's prefix.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(ember::distributed::Store& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, store_.timeout()); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  ember::distributed::Store& store_;
  std::string prefix_;
};

}  // namespace ember::detail::distributed
