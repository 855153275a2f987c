// SPDX-License-Identifier: MIT
#include "tools/serve/http_workers.h"

#include <utility>

namespace basalt::serve {

void HttpWorkers::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!idle_.empty()) {
    Idle* w = idle_.back();
    idle_.pop_back();
    w->job = std::move(fn);
    w->cv.notify_one();
  } else if (threads_.size() < max_ && !shutdown_) {
    threads_.emplace_back([this, job = std::move(fn)]() mutable { work(std::move(job)); });
  } else {
    waiting_.push_back(std::move(fn));
  }
}

void HttpWorkers::work(std::function<void()> job) {
  Idle me;
  for (;;) {
    job();
    job = nullptr;
    std::unique_lock<std::mutex> lock(mutex_);
    if (!waiting_.empty()) {
      job = std::move(waiting_.front());
      waiting_.pop_front();
      continue;
    }
    if (shutdown_) return;
    idle_.push_back(&me);
    me.cv.wait(lock, [&] { return me.job || me.stop; });
    if (!me.job) return;
    job = std::move(me.job);
    me.job = nullptr;
  }
}

void HttpWorkers::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutdown_ = true;
    for (Idle* w : idle_) {
      w->stop = true;
      w->cv.notify_one();
    }
    idle_.clear();
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

size_t HttpWorkers::threads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

size_t HttpWorkers::idle_threads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_.size();
}

}  // namespace basalt::serve
