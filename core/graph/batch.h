// SPDX-License-Identifier: MIT
// A batch: tokens of one or several sequences, each with its position, and
// which of them want logits. The graph runs once per batch.
#pragma once

#include <cstdint>
#include <vector>

namespace basalt {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pos;
  std::vector<int32_t> seq;        // KV cache slot of each token
  std::vector<uint8_t> want_logits;

  void add(int32_t token, int32_t position, int32_t seq_id, bool logits) {
    tokens.push_back(token);
    pos.push_back(position);
    seq.push_back(seq_id);
    want_logits.push_back(logits);
  }
  void clear() { tokens.clear(), pos.clear(), seq.clear(), want_logits.clear(); }
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  int64_t n_outputs() const {
    int64_t n = 0;
    for (uint8_t w : want_logits) n += w;
    return n;
  }
};

}  // namespace basalt
