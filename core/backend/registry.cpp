// SPDX-License-Identifier: MIT
#include "core/backend/registry.h"

#include <algorithm>
#include <mutex>

namespace basalt {

namespace {
std::mutex g_mutex;
std::vector<BackendFactory>& factories() {
  static std::vector<BackendFactory> f;
  return f;
}
}  // namespace

void register_backend(BackendFactory factory) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& f = factories();
  auto same = std::find_if(f.begin(), f.end(), [&](const BackendFactory& b) { return b.name == factory.name; });
  if (same != f.end()) *same = std::move(factory);
  else f.push_back(std::move(factory));
}

std::vector<BackendFactory> registered_backends() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return factories();
}

}  // namespace basalt
