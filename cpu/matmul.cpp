// SPDX-License-Identifier: MIT
#include "cpu/matmul.h"

#include <omp.h>

#include <algorithm>

#include "core/error.h"
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
#endif
  return kernels::matmul_ref;
}

void matmul(const MatmulArgs& a, Isa isa) {
  if (a.w->format == WeightFormat::qa && (!a.xq || a.xq->cols != a.w->cols || a.xq->n_tok < a.n_tok))
    throw Error("internal: matmul with " + a.w->name + " needs activations quantized to its width");
  if (onednn_wanted(*a.w, a.n_tok, isa) && onednn_matmul(a)) return;
  MatmulKernel k = find_matmul_kernel(*a.w, isa);
  const int64_t rows = a.r1 - a.r0;
  // Row chunks a multiple of 16 so SIMD kernels can work on whole tiles.
  const int n_threads = std::max(1, static_cast<int>(std::min<int64_t>(omp_get_max_threads(), (rows + 15) / 16)));
  if (n_threads == 1) {
    k(a);
    return;
  }
  const bool balanced = n_threads <= WorkShares::kMaxThreads;
  WorkShares shares(balanced ? n_threads : 1);
#pragma omp parallel num_threads(n_threads)
  {
    int nt = omp_get_num_threads(), it = omp_get_thread_num();
    int64_t per = (rows + nt - 1) / nt;
    per = (per + 15) / 16 * 16;
    int64_t lo = a.r0 + std::min<int64_t>(rows, per * it), hi = a.r0 + std::min<int64_t>(rows, per * (it + 1));
    if (lo < hi) {
      MatmulArgs part = a;
      part.r0 = lo;
      part.r1 = hi;
      part.y = a.y + (lo - a.r0);
      part.shares = balanced ? &shares : nullptr;
      part.share = it;
      k(part);
    }
  }
}

void matmul(const MatmulArgs& a) { matmul(a, selected_isa()); }

}  // namespace basalt
