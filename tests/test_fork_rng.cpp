// ForkRng (src/ops/fork_rng.h): draws inside the scope leave the process's generators as
// they were, for the calling thread only.
#include <gtest/gtest.h>

#include <thread>

#include "ember/ember.h"
#include "ops/fork_rng.h"

using namespace ember;

namespace {

TEST(ForkRng, DrawsInsideTheScopeDoNotShiftLaterDraws) {
  manual_seed(3);
  Tensor first = rand({4});
  {
    detail::ForkRng fork;
    Tensor inside = rand({4});
    EXPECT_FALSE(inside.equal(first)) << "the fork starts where the generator stands";
    manual_seed(9);  // seeds the fork only
    rand({8});
  }
  Tensor after = rand({4});
  manual_seed(3);
  EXPECT_TRUE(rand({4}).equal(first));
  EXPECT_TRUE(rand({4}).equal(after));
}

TEST(ForkRng, ScopesNest) {
  manual_seed(4);
  Tensor expected = rand({3});
  manual_seed(4);
  {
    detail::ForkRng outer;
    Tensor a = rand({3});
    {
      detail::ForkRng inner;
      EXPECT_FALSE(rand({3}).equal(a)) << "the inner fork starts where the outer one stands";
    }
    Tensor b = rand({3});
    EXPECT_FALSE(b.equal(a));
  }
  EXPECT_TRUE(rand({3}).equal(expected));
}

TEST(ForkRng, OtherThreadsDrawsAreKept) {
  manual_seed(5);
  Tensor other;
  {
    detail::ForkRng fork;
    rand({4});
    std::thread t([&] { other = rand({4}); });
    t.join();
  }
  Tensor after = rand({4});
  manual_seed(5);
  EXPECT_TRUE(rand({4}).equal(other));
  EXPECT_TRUE(rand({4}).equal(after)) << "the other thread's draw advanced the generator";
}

}  // namespace
