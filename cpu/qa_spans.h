// SPDX-License-Identifier: MIT
// The tiles a qa matmul call covers, and the order the ISA kernels take them
// in: for decode (up to kPairTokens tokens) tiles from the two halves of the
// range side by side, two read streams per thread, which this kind of CPU
// needs to reach its read bandwidth. Shared by the x86 and ARM kernels. In an
// anonymous namespace: each kernel file, compiled with its own ISA flags, gets
// its own copy (see core/util/half.h).
#pragma once

#include <algorithm>
#include <new>
#include <vector>

#include "cpu/matmul.h"
#include "cpu/work_shares.h"

namespace basalt::kernels {
namespace {

// The rows of one tile that a call computes: lanes [lane0, lane0 + n) are rows r.. r + n - 1.
struct Span {
  const uint8_t* tile;
  int64_t r;
  int lane0, n;
};

// The tiles of [r0, r1), cut at matrix boundaries (stacked experts).
inline void collect_spans(const MatmulArgs& a, std::vector<Span>& spans) {
  const Weight& w = *a.w;
  spans.clear();
  for (int64_t r = a.r0; r < a.r1;) {
    int lane0;
    const uint8_t* tile = w.tile_of(r, &lane0);
    const int64_t mat_end = (r / w.mat_rows + 1) * w.mat_rows;
    int64_t n = 16 - lane0;  // no std::min here: see core/util/half.h on templates in ISA files
    if (a.r1 - r < n) n = a.r1 - r;
    if (mat_end - r < n) n = mat_end - r;
    spans.push_back({tile, r, lane0, static_cast<int>(n)});
    r += n;
  }
}

// The spans of one call and how they are grouped into units of work: for
// decode, unit u < pairs is kStreams spans from distant parts of the range
// side by side (spans[k * pairs + u]), and the spans left over run one per
// unit after them; otherwise every span is a unit.
struct SpanUnits {
  const Span* spans;
  int64_t n_spans, pairs;
  MatmulArgs a;  // the call the spans belong to (where its rows go in y)
};

// Runs the units of the call through run.template operator()<NTILE, kMax>(spans,
// args): kStreams spans side by side for decode (up to kPairTokens tokens),
// kTiles neighbouring spans (fewer at the end) with up to kMaxTok tokens per
// pass otherwise. With a.shares, units are taken one at a time so that a
// thread done early can take over the back half of another's (cpu/work_shares.h).
template <int kPairTokens, int kMaxTok, typename Run, int kStreams = 2, int kTiles = 1>
void for_spans(const MatmulArgs& a, Run run) {
  // With shares, a thief may read them after this returns: they live as long
  // as the shares. Alone, this thread's own copy is reused.
  struct State {
    std::vector<Span> spans;
    SpanUnits units;
  };
  thread_local State alone;
  State* state = &alone;
  if (a.shares) {
    bool fresh = false;
    void* room = a.shares->room(a.share, sizeof(State), [](void* s) { static_cast<State*>(s)->~State(); }, &fresh);
    state = fresh ? new (room) State() : static_cast<State*>(room);
  }
  collect_spans(a, state->spans);
  const bool decode = a.n_tok <= kPairTokens;
  SpanUnits& own = state->units;
  own = {state->spans.data(), static_cast<int64_t>(state->spans.size()), 0, a};
  if (decode) own.pairs = own.n_spans / kStreams;
  const int64_t n_units = decode ? own.n_spans - (kStreams - 1) * own.pairs : (own.n_spans + kTiles - 1) / kTiles;

  auto run_unit = [&](const SpanUnits& s, int64_t u) {
    if (!decode) {
      const int64_t first = u * kTiles;
      if (first + kTiles <= s.n_spans) {
        const Span* side[kTiles];
        for (int k = 0; k < kTiles; ++k) side[k] = &s.spans[first + k];
        return run.template operator()<kTiles, kMaxTok>(side, s.a);
      }
      for (int64_t k = first; k < s.n_spans; ++k) {  // the last few
        const Span* one[1] = {&s.spans[k]};
        run.template operator()<1, kMaxTok>(one, s.a);
      }
      return;
    }
    if (u < s.pairs) {
      const Span* side[kStreams];
      for (int k = 0; k < kStreams; ++k) side[k] = &s.spans[k * s.pairs + u];
      return run.template operator()<kStreams, kPairTokens>(side, s.a);
    }
    const Span* one[1] = {&s.spans[u + (kStreams - 1) * s.pairs]};
    run.template operator()<1, kPairTokens>(one, s.a);
  };
  if (!a.shares) {
    for (int64_t u = 0; u < n_units; ++u) run_unit(own, u);
    return;
  }
  a.shares->publish(a.share, n_units, &own);
  for (int64_t u; (u = a.shares->take(a.share)) >= 0;) run_unit(own, u);
  WorkShares::Stolen st;
  while (a.shares->steal(a.share, &st))
    for (int64_t u = st.u0; u < st.u1; ++u) run_unit(*static_cast<const SpanUnits*>(st.ctx), u);
}

// The reading ahead of a register-blocked prefill pass. A register block
// reads its tiles from memory once, then from cache for each further pass over
// its tokens; each pass reads its share of the next unit's tiles ahead (pass p
// of P the p-th P-th of them, spread over its blocks), so that memory reads
// overlap every pass, not only the first (8-16 tokens 1.2-1.6x, 512 unchanged:
// docs/PERFORMANCE.md 3.1b). Into L2, not L1: the lines wait a whole unit.
struct Prefetch {
  const char* line = nullptr;  // the next line to ask for
  int64_t lines = 0;           // this pass's share
  int64_t due = 0;             // lines owed x nb

  // Pass `pass` of `passes`: its share of the unit_lines lines from next.
  static Prefetch share(const uint8_t* next, int64_t unit_lines, int64_t pass, int64_t passes) {
    const int64_t first = unit_lines * pass / passes, last = unit_lines * (pass + 1) / passes;
    return {reinterpret_cast<const char*>(next + 64 * first), last - first};
  }
  // At each of a pass's nb blocks: block b ends with b * lines / nb of them asked for.
  void at_block(int64_t nb) {
    for (due += lines; due >= nb; due -= nb, line += 64) __builtin_prefetch(line, 0, 2);  // x86: prefetcht1
  }
};

}  // namespace
}  // namespace basalt::kernels
