// SPDX-License-Identifier: MIT
#include "tests/unit/isa_testing.h"

#include <cstdlib>
#include <sstream>

namespace basalt::testutil {

namespace {
// BASALT_ISA as a cap; -1 when unset (the engine itself rejects a bad value).
int isa_cap() {
  const char* env = std::getenv("BASALT_ISA");
  if (!env || !*env) return -1;
  for (Isa isa : kEveryIsa)
    if (std::string(env) == isa_name(isa)) return static_cast<int>(isa);
  return -1;
}
}  // namespace

bool isa_testable(Isa isa, std::string* why) {
  if (!cpu_supports(isa)) {
    *why = std::string("this CPU (or its kernel) lacks ") + isa_name(isa);
    return false;
  }
  if (const int cap = isa_cap(); cap >= 0 && static_cast<int>(isa) > cap) {
    *why = std::string("BASALT_ISA=") + std::getenv("BASALT_ISA") + " stands in for a CPU without " + isa_name(isa);
    return false;
  }
  return true;
}

bool name_required(const std::string& name) {
  const char* env = std::getenv("BASALT_REQUIRE_ISA");
  if (!env) return false;
  std::stringstream list(env);
  for (std::string item; std::getline(list, item, ',');)
    if (item == "all" || item == name) return true;
  return false;
}

bool isa_required(Isa isa) { return name_required(isa_name(isa)); }

std::vector<Isa> testable_isas() {
  std::vector<Isa> isas;
  std::string why;
  for (Isa isa : kEveryIsa)
    if (isa_testable(isa, &why)) isas.push_back(isa);
  return isas;
}

}  // namespace basalt::testutil
