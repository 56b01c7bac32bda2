// Gloo's rendezvous over ember's store, and SIGPIPE (gloo_rendezvous.h).
#include "distributed/gloo_rendezvous.h"

#include <signal.h>

namespace ember::detail::distributed {

void ignore_sigpipe_unless_handled() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  store_.set(prefix_ + key, std::string(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  std::string value = store_.get(prefix_ + key);
  return {value.begin(), value.end()};
}

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> prefixed;
  for (const auto& k : keys) prefixed.push_back(prefix_ + k);
  store_.wait(prefixed, timeout);
}

}  // namespace ember::detail::distributed
