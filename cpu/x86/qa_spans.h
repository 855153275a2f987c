// SPDX-License-Identifier: MIT
// The tiles a qa matmul call covers, and the order the ISA kernels take them
// in: for decode (up to kPairTokens tokens) tiles from the two halves of the
// range side by side, two read streams per thread, which this kind of CPU
// needs to reach its read bandwidth. In an anonymous namespace: each kernel
// file, compiled with its own ISA flags, gets its own copy (see quant/half.h).
#pragma once

#include <algorithm>
#include <vector>

#include "cpu/matmul.h"

namespace basalt::kernels {
namespace {

// The rows of one tile that a call computes: lanes [lane0, lane0 + n) are rows r.. r + n - 1.
struct Span {
  const uint8_t* tile;
  int64_t r;
  int lane0, n;
};

// Runs the spans of the call through run.template operator()<NTILE, kMax>(spans):
// kStreams spans from distant parts of the range side by side for decode (up
// to kPairTokens tokens), single spans with up to kMaxTok tokens per pass otherwise.
template <int kPairTokens, int kMaxTok, typename Run, int kStreams = 2>
void for_spans(const MatmulArgs& a, Run run) {
  const Weight& w = *a.w;
  // The tiles of [r0, r1), cut at matrix boundaries (stacked experts).
  thread_local std::vector<Span> spans;
  spans.clear();
  for (int64_t r = a.r0; r < a.r1;) {
    int lane0;
    const uint8_t* tile = w.tile_of(r, &lane0);
    const int64_t mat_end = (r / w.mat_rows + 1) * w.mat_rows;
    const int n = static_cast<int>(std::min<int64_t>({16 - lane0, a.r1 - r, mat_end - r}));
    spans.push_back({tile, r, lane0, n});
    r += n;
  }
  const size_t n_spans = spans.size();
  if (a.n_tok > kPairTokens) {
    for (size_t i = 0; i < n_spans; ++i) {
      const Span* one[1] = {&spans[i]};
      run.template operator()<1, kMaxTok>(one);
    }
    return;
  }
  const size_t part = n_spans / kStreams;
  for (size_t i = 0; i < part; ++i) {
    const Span* side[kStreams];
    for (int k = 0; k < kStreams; ++k) side[k] = &spans[k * part + i];
    run.template operator()<kStreams, kPairTokens>(side);
  }
  for (size_t i = kStreams * part; i < n_spans; ++i) {
    const Span* one[1] = {&spans[i]};
    run.template operator()<1, kPairTokens>(one);
  }
}

}  // namespace
}  // namespace basalt::kernels
