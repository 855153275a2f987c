// SPDX-License-Identifier: MIT
// Per-key limits on requests and tokens a minute, as token buckets: a key may
// spend a minute's allowance at once, then it refills evenly. A request is
// charged its prompt and its max_tokens when it is admitted, and what it did
// not generate is given back when it ends, so a key never goes past its limit.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>

namespace basalt::serve {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // Limits a minute; 0 turns that one off.
  RateLimiter(double requests_per_minute, double tokens_per_minute);
  bool enabled() const { return rpm_ > 0 || tpm_ > 0; }
  double tokens_per_minute() const { return tpm_; }

  // Charges a request of `tokens` to key and returns 0, or returns the
  // seconds until the key's budgets would allow it (nothing charged).
  double admit(const std::string& key, double tokens, Clock::time_point now = Clock::now());
  // Gives back tokens a request was charged and did not use.
  void refund(const std::string& key, double tokens);

 private:
  struct Bucket {
    double requests, tokens;
    Clock::time_point last;
  };
  void refill(Bucket& b, Clock::time_point now) const;

  const double rpm_, tpm_;
  std::mutex mutex_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace basalt::serve
