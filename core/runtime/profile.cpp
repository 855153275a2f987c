// SPDX-License-Identifier: MIT
#include "core/runtime/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "quant/weight.h"

namespace basalt {

namespace {

// "blk.12.ffn_up.weight" -> "ffn_up"
std::string weight_role(const std::string& name) {
  std::string s = name;
  if (s.rfind("blk.", 0) == 0) {
    const size_t dot = s.find('.', 4);
    if (dot != std::string::npos) s = s.substr(dot + 1);
  }
  if (s.size() > 7 && s.compare(s.size() - 7, 7, ".weight") == 0) s.resize(s.size() - 7);
  return s;
}

class Table final : public OpProfile {
 public:
  void add(const Node& n, int64_t batch_tokens, double seconds) override {
    std::string key = batch_tokens == 1 ? "decode " : "prefill ";
    key += op_name(n.op);
    if (n.op == Op::matmul && n.weight) {
      key += ' ';  // not " " + string&&: gcc 12's false -Wrestrict (its bug 105329)
      key += weight_role(n.weight->name);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[key];
    e.seconds += seconds;
    ++e.calls;
  }

  ~Table() {
    std::vector<std::pair<std::string, Entry>> rows(entries_.begin(), entries_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0;
    for (const auto& r : rows) total += r.second.seconds;
    int width = 30;  // the op column: as wide as its longest key ("decode matmul ffn_up.weight[0:8192]")
    for (const auto& r : rows) width = std::max(width, static_cast<int>(r.first.size()));
    std::fprintf(stderr, "basalt profile (BASALT_PROFILE): %.3f s in ops\n%-*s %10s %7s %10s\n", total, width, "op", "seconds",
                 "share", "calls");
    for (const auto& [key, e] : rows)
      std::fprintf(stderr, "%-*s %10.3f %6.1f%% %10lld\n", width, key.c_str(), e.seconds,
                   total > 0 ? 100 * e.seconds / total : 0.0, static_cast<long long>(e.calls));
  }

 private:
  struct Entry {
    double seconds = 0;
    long long calls = 0;
  };
  std::mutex mutex_;
  std::map<std::string, Entry> entries_;
};

}  // namespace

OpProfile* OpProfile::get() {
  static Table* table = [] {
    const char* v = std::getenv("BASALT_PROFILE");
    return v && *v && std::string(v) != "0" ? new Table : nullptr;
  }();
  static struct Printer {  // prints (and frees) the table at exit
    ~Printer() { delete table; }
  } printer;
  return table;
}

}  // namespace basalt
