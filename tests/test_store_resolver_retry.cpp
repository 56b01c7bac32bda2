// A transient resolver failure (EAI_AGAIN, "Temporary failure in name resolution") while a
// rank connects to the store is retried until the store's timeout, as PyTorch's
// SocketConnectOp does (it retries any getaddrinfo failure until its deadline). This
// executable interposes getaddrinfo: the host name kFlakyHost fails with EAI_AGAIN a
// given number of times, then resolves to 127.0.0.1; every other name goes to the C
// library's resolver.
// (Note [Transient resolver failures] in src/distributed/socket.cpp.)
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netdb.h>

#include <atomic>
#include <chrono>
#include <cstring>

#include "ember/ember.h"

namespace {

constexpr const char* kFlakyHost = "ember-flaky-resolver.test";
constexpr const char* kMissingHost = "ember-missing-host.test";  // always EAI_NONAME
std::atomic<int> failures_left{0};
std::atomic<int> missing_lookups{0};

}  // namespace

extern "C" int getaddrinfo(const char* node, const char* service, const addrinfo* hints, addrinfo** result) {
  using Resolver = int (*)(const char*, const char*, const addrinfo*, addrinfo**);
  static const auto real = reinterpret_cast<Resolver>(::dlsym(RTLD_NEXT, "getaddrinfo"));
  if (node != nullptr && std::strcmp(node, kFlakyHost) == 0) {
    if (failures_left.fetch_sub(1) > 0) return EAI_AGAIN;
    node = "127.0.0.1";
  }
  if (node != nullptr && std::strcmp(node, kMissingHost) == 0) {
    missing_lookups.fetch_add(1);
    return EAI_NONAME;
  }
  return real(node, service, hints, result);
}

namespace {

using namespace std::chrono_literals;
namespace dist = ember::distributed;

TEST(StoreResolver, ATransientFailureIsRetriedWithinTheTimeout) {
  dist::TCPStore master("127.0.0.1", 0, 2, /*is_master=*/true, 10s);
  failures_left = 3;
  // Before: "Failed to resolve the address 'ember-flaky-resolver.test': Temporary failure in name resolution" at once.
  dist::TCPStore client(kFlakyHost, master.port(), 2, /*is_master=*/false, 10s);
  client.set("k", "v");
  EXPECT_EQ(master.get("k"), "v");
  EXPECT_LE(failures_left.load(), 0);
}

TEST(StoreResolver, AResolverThatNeverAnswersTimesOutNamingTheResolverError) {
  dist::TCPStore master("127.0.0.1", 0, 2, /*is_master=*/true, 10s);
  failures_left = 1 << 30;
  try {
    dist::TCPStore client(kFlakyHost, master.port(), 2, /*is_master=*/false, 300ms);
    ADD_FAILURE() << "connected through a resolver that never answers";
  } catch (const ember::DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("while trying to resolve 'ember-flaky-resolver.test'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(::gai_strerror(EAI_AGAIN)), std::string::npos) << e.what();
  }
  failures_left = 0;
}

TEST(StoreResolver, ANameThatDoesNotExistFailsAtOnce) {
  // EAI_NONAME is final: one lookup, then the error, not a retry until the (long) timeout.
  missing_lookups = 0;
  try {
    dist::TCPStore client(kMissingHost, 29999, 2, /*is_master=*/false, 600s);
    ADD_FAILURE() << "connected to a host that does not exist";
  } catch (const ember::DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("Failed to resolve the address 'ember-missing-host.test'"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(missing_lookups.load(), 1);
}

TEST(StoreResolver, TheInterposedResolverFailsThenResolves) {
  failures_left = 1;
  addrinfo* found = nullptr;
  EXPECT_EQ(::getaddrinfo(kFlakyHost, "1", nullptr, &found), EAI_AGAIN);
  ASSERT_EQ(::getaddrinfo(kFlakyHost, "1", nullptr, &found), 0);
  ::freeaddrinfo(found);
}

}  // namespace
