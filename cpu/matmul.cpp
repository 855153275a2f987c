// SPDX-License-Identifier: MIT
#include "cpu/matmul.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/util/thread_pool.h"
#include "cpu/onednn_matmul.h"
#include "cpu/work_shares.h"

namespace basalt {

MatmulKernel find_matmul_kernel(const Weight& w, Isa isa) {
#if defined(BASALT_X86)
  if (isa == Isa::amx && w.format == WeightFormat::qa)
    if (MatmulKernel k = kernels::matmul_qa_amx(w)) return k;
  if (isa >= Isa::avx512)
    if (MatmulKernel k = kernels::matmul_avx512(w)) return k;
  if (isa == Isa::avxvnni && w.format == WeightFormat::qa)
    if (MatmulKernel k = kernels::matmul_qa_avxvnni(w)) return k;
  if (isa >= Isa::avx2)
    if (MatmulKernel k = kernels::matmul_avx2(w)) return k;
#elif defined(BASALT_ARM)
  if (isa == Isa::dotprod && w.format == WeightFormat::qa)
    if (MatmulKernel k = kernels::matmul_qa_dotprod(w)) return k;
  if (isa == Isa::neon || isa == Isa::dotprod)
    if (MatmulKernel k = w.format == WeightFormat::qa ? kernels::matmul_qa_neon(w) : kernels::matmul_dense_neon(w)) return k;
#endif
  return kernels::matmul_ref;
}

void prepare_activations(const MatmulArgs& a, MatmulKernel k) {
#if defined(BASALT_X86)
  if (!a.xq || a.w->format != WeightFormat::qa) return;
  int tokens = 0;
  if (k == kernels::matmul_qa_avx2(*a.w)) tokens = kernels::qa_avx2_pass_tokens(*a.w, a.n_tok);
  if (k == kernels::matmul_qa_avxvnni(*a.w)) tokens = kernels::qa_avxvnni_pass_tokens(*a.w, a.n_tok);
  if (tokens) a.xq->make_passes(tokens, a.n_tok);
#else
  (void)a, (void)k;
#endif
}

void matmul(const MatmulArgs& a, Isa isa) {
  if (a.w->format == WeightFormat::qa && (!a.xq || a.xq->cols != a.w->cols || a.xq->n_tok < a.n_tok))
    throw Error("internal: matmul with " + a.w->name + " needs activations quantized to its width");
  if (onednn_wanted(*a.w, a.n_tok, isa) && onednn_matmul(a)) return;
  MatmulKernel k = find_matmul_kernel(*a.w, isa);
  prepare_activations(a, k);
  const int64_t rows = a.r1 - a.r0;
  // One part per thread, row chunks a multiple of 16 so SIMD kernels can work
  // on whole tiles. Parts are claimed from the pool's counter and the kernels
  // take each other's tiles (WorkShares), so a late thread holds up nothing.
  ThreadPool& pool = engine_pool();
  const int n_parts = std::max(1, static_cast<int>(std::min<int64_t>(pool.size(), (rows + 15) / 16)));
  if (n_parts == 1) {
    k(a);
    return;
  }
  const bool balanced = n_parts <= WorkShares::kMaxThreads;
  // Kept per calling thread, with the kernels' rooms in it, from call to call.
  thread_local WorkShares shares(1);
  shares.reset(balanced ? n_parts : 1);
  int64_t per = (rows + n_parts - 1) / n_parts;
  per = (per + 15) / 16 * 16;
  // The parts outlive every unit: a thread that took over some of a part's
  // tiles reads its arguments after the part's own thread has moved on.
  thread_local std::vector<MatmulArgs> kept_parts;
  std::vector<MatmulArgs>& parts = kept_parts;  // the caller's: a pool thread naming kept_parts gets its own
  parts.assign(static_cast<size_t>(n_parts), a);
  for (int it = 0; it < n_parts; ++it) {
    MatmulArgs& part = parts[static_cast<size_t>(it)];
    part.r0 = a.r0 + std::min<int64_t>(rows, per * it);
    part.r1 = a.r0 + std::min<int64_t>(rows, per * (it + 1));
    part.y = a.y + (part.r0 - a.r0);
    part.shares = balanced ? &shares : nullptr;
    part.share = it;
  }
  pool.run(n_parts, [&](int64_t it, int) {
    const MatmulArgs& part = parts[static_cast<size_t>(it)];
    if (part.r0 < part.r1) k(part);
  });
}

void matmul(const MatmulArgs& a) { matmul(a, selected_isa()); }

}  // namespace basalt
