// SPDX-License-Identifier: MIT
// The default thread count: the physical cores this process may run on.
#include "core/util/threads.h"

#include <gtest/gtest.h>
#include <sched.h>

namespace basalt {
namespace {

TEST(Threads, PhysicalCoresAreThoseOfTheAffinityMask) {
  cpu_set_t all;
  ASSERT_EQ(0, sched_getaffinity(0, sizeof all, &all));
  const int cpus = CPU_COUNT(&all), cores = physical_core_count();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, cpus);
  // Held to one CPU (taskset -c N, a cpuset of one), one core, however many the machine has.
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(0, sched_setaffinity(0, sizeof one, &one));
  const int held = physical_core_count();
  ASSERT_EQ(0, sched_setaffinity(0, sizeof all, &all));
  EXPECT_EQ(held, 1);
}

}  // namespace
}  // namespace basalt
