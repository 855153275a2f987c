// SPDX-License-Identifier: MIT
#include "tools/serve/rate_limit.h"

#include <algorithm>

namespace basalt::serve {

RateLimiter::RateLimiter(double requests_per_minute, double tokens_per_minute)
    : rpm_(std::max(0.0, requests_per_minute)), tpm_(std::max(0.0, tokens_per_minute)) {}

void RateLimiter::refill(Bucket& b, Clock::time_point now) const {
  const double minutes = std::chrono::duration<double>(now - b.last).count() / 60;
  b.requests = std::min(rpm_, b.requests + minutes * rpm_);
  b.tokens = std::min(tpm_, b.tokens + minutes * tpm_);
  b.last = now;
}

double RateLimiter::admit(const std::string& key, double tokens, Clock::time_point now) {
  if (!enabled()) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  if (buckets_.size() > 4096)  // keys idle long enough to be full again are as good as new
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      refill(it->second, now);
      it = it->second.requests >= rpm_ && it->second.tokens >= tpm_ ? buckets_.erase(it) : std::next(it);
    }
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{rpm_, tpm_, now});
  Bucket& b = it->second;
  refill(b, now);
  double wait = 0;
  if (rpm_ > 0 && b.requests < 1) wait = std::max(wait, (1 - b.requests) / rpm_ * 60);
  if (tpm_ > 0 && b.tokens < tokens) wait = std::max(wait, (tokens - b.tokens) / tpm_ * 60);
  if (wait > 0) return wait;
  if (rpm_ > 0) b.requests -= 1;
  if (tpm_ > 0) b.tokens -= tokens;
  return 0;
}

void RateLimiter::refund(const std::string& key, double tokens) {
  if (tpm_ <= 0 || tokens <= 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = buckets_.find(key);
  if (it != buckets_.end()) it->second.tokens = std::min(tpm_, it->second.tokens + tokens);
}

}  // namespace basalt::serve
