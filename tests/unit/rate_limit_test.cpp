// SPDX-License-Identifier: MIT
// Per-key token buckets (tools/serve/rate_limit.h), on a clock the test moves.
#include "tools/serve/rate_limit.h"

#include <gtest/gtest.h>

namespace basalt::serve {
namespace {

using Clock = RateLimiter::Clock;

TEST(RateLimiter, RequestsAMinutePerKey) {
  RateLimiter limits(3, 0);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limits.admit("a", 100, t0), 0) << "request " << i;
  const double wait = limits.admit("a", 100, t0);
  EXPECT_NEAR(wait, 20, 1e-6);  // one request refills in 60 / 3 s
  EXPECT_EQ(limits.admit("b", 100, t0), 0);  // another key has its own budget
  EXPECT_GT(limits.admit("a", 100, t0 + std::chrono::seconds(19)), 0);
  EXPECT_EQ(limits.admit("a", 100, t0 + std::chrono::seconds(21)), 0);
}

TEST(RateLimiter, TokensAMinuteWithRefunds) {
  RateLimiter limits(0, 1000);
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(limits.admit("k", 600, t0), 0);
  EXPECT_NEAR(limits.admit("k", 600, t0), 12, 1e-6);  // 200 tokens short at 1000 a minute
  limits.refund("k", 500);  // the first request used 100 of its 600
  EXPECT_EQ(limits.admit("k", 600, t0), 0);
  EXPECT_GT(limits.admit("k", 301, t0), 0);  // 300 left
  EXPECT_EQ(limits.admit("k", 1000, t0 + std::chrono::seconds(60)), 0);  // full again after a minute, no more
  EXPECT_GT(limits.admit("k", 1, t0 + std::chrono::seconds(60)), 0);
}

TEST(RateLimiter, OffByDefault) {
  RateLimiter limits(0, 0);
  EXPECT_FALSE(limits.enabled());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(limits.admit("k", 1e9), 0);
}

}  // namespace
}  // namespace basalt::serve
