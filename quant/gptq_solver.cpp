// SPDX-License-Identifier: MIT
#include "quant/gptq_solver.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"
#include "core/util/half.h"
#include "core/util/thread_pool.h"

namespace basalt {

namespace {

// The per-row grid of a group (GPTQ's quantizer): min/max including 0, the
// scale rounded to f16; sym centers it on 2^(bits-1).
struct Grid {
  float scale;
  int zero;
};

template <typename T>
Grid find_grid(const T* x, int64_t n, int maxq, bool sym) {
  double lo = 0, hi = 0;
  for (int64_t j = 0; j < n; ++j) lo = std::min<double>(lo, x[j]), hi = std::max<double>(hi, x[j]);
  if (sym) hi = std::max(-lo, hi), lo = -hi;
  if (lo == 0 && hi == 0) lo = -1, hi = 1;
  float scale = f16_to_f32(f32_to_f16(static_cast<float>((hi - lo) / maxq)));
  if (scale == 0) scale = f16_to_f32(1);  // below f16's range: every weight rounds to the zero point anyway
  const int zero = sym ? (maxq + 1) / 2 : static_cast<int>(std::clamp(std::nearbyint(-lo / scale), 0.0, double(maxq)));
  return {scale, zero};
}

int quantize_value(double x, const Grid& g, int maxq) {
  return static_cast<int>(std::clamp(std::nearbyint(x / g.scale) + g.zero, 0.0, double(maxq)));
}

// Eight running sums: the adds overlap instead of waiting on each other, and
// vectorize. The solver is bound by reading the matrices (a blocked
// Cholesky would read less: a debt for large layers).
double dot(const double* a, const double* b, int64_t n) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) s[j] += a[k + j] * b[k + j];
  for (; k < n; ++k) s[0] += a[k] * b[k];
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// y -= e * x
void sub_scaled(double* y, const double* x, double e, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] -= e * x[j];
}

// In place: the lower Cholesky factor L of a (n x n, row-major), a = L L^T. False if not positive definite.
bool cholesky(std::vector<double>& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const double d = a[j * n + j] - dot(&a[j * n], &a[j * n], j);
    if (!(d > 0)) return false;
    const double ljj = std::sqrt(d);
    a[j * n + j] = ljj;
    parallel_for(n - j - 1, 64, [&](int64_t b, int64_t e) {
      for (int64_t i = j + 1 + b; i < j + 1 + e; ++i) a[i * n + j] = (a[i * n + j] - dot(&a[i * n], &a[j * n], j)) / ljj;
    });
    for (int64_t k = j + 1; k < n; ++k) a[j * n + k] = 0;
  }
  return true;
}

// U with H^-1 = U^T U (upper), in place. With J the order reversal, the
// Cholesky factor L of J H J gives H = V V^T with V = J L J upper, so
// H^-1 = V^-T V^-1 and U = V^-1 = J L^-1 J: one factorization and one
// triangular inverse.
bool inverse_upper_factor(std::vector<double>& h, int64_t n) {
  std::reverse(h.begin(), h.end());  // (i, j) -> (n-1-i, n-1-j)
  if (!cholesky(h, n)) return false;
  // Column c of L^-1, by forward substitution, stored as row c of t so the inner loops read memory in order.
  std::vector<double> t(static_cast<size_t>(n * n), 0.0);
  engine_pool().run((n + 15) / 16, [&](int64_t chunk, int) {  // 16 columns a unit: their costs differ
    for (int64_t c = chunk * 16; c < std::min(n, chunk * 16 + 16); ++c) {
      double* col = &t[c * n];
      col[c] = 1 / h[c * n + c];
      for (int64_t i = c + 1; i < n; ++i) col[i] = -dot(&h[i * n + c], &col[c], i - c) / h[i * n + i];
    }
  });
  // U[i][j] = (L^-1)[n-1-i][n-1-j] = t[n-1-j][n-1-i].
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) h[i * n + j] = j >= i ? t[(n - 1 - j) * n + (n - 1 - i)] : 0.0;
  return true;
}

void check_options(const GptqOptions& o, int64_t n_in) {
  if (o.bits < 2 || o.bits > 8) throw Error("GPTQ: bits " + std::to_string(o.bits) + " (2 to 8)");
  if (o.group_size != -1 && (o.group_size <= 0 || o.group_size > n_in))
    throw Error("GPTQ: group size " + std::to_string(o.group_size) + " for " + std::to_string(n_in) + " inputs");
  if (o.block <= 0 || !(o.damp >= 0)) throw Error("GPTQ: bad block size or dampening");
}

GptqLayer empty_layer(int64_t n_out, int64_t n_in, int64_t gs) {
  GptqLayer l;
  l.n_out = n_out;
  l.n_in = n_in;
  l.n_groups = (n_in + gs - 1) / gs;
  l.q.assign(static_cast<size_t>(n_out * n_in), 0);
  l.scales.assign(static_cast<size_t>(l.n_groups * n_out), 0);
  l.zeros.assign(l.scales.size(), 0);
  l.g_idx.assign(static_cast<size_t>(n_in), 0);
  return l;
}

}  // namespace

float GptqLayer::weight(int64_t o, int64_t i) const {
  const int64_t g = g_idx[static_cast<size_t>(i)];
  return f16_to_f32(scales[static_cast<size_t>(g * n_out + o)]) *
         static_cast<float>(q[static_cast<size_t>(o * n_in + i)] - zeros[static_cast<size_t>(g * n_out + o)]);
}

GptqHessian gptq_prepare(std::vector<double> h, int64_t n, const GptqOptions& opt) {
  check_options(opt, n);
  if (static_cast<int64_t>(h.size()) != n * n) throw Error("GPTQ: Hessian of the wrong size");
  GptqHessian r;
  r.n = n;
  // The order the columns are quantized in (act-order: by decreasing H diagonal).
  r.perm.resize(static_cast<size_t>(n));
  std::iota(r.perm.begin(), r.perm.end(), 0);
  if (opt.act_order)
    std::stable_sort(r.perm.begin(), r.perm.end(), [&](int64_t a, int64_t b) { return h[a * n + a] > h[b * n + b]; });
  std::vector<double>& hp = r.u;
  hp.resize(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) hp[i * n + j] = h[r.perm[i] * n + r.perm[j]];
  h = {};
  r.dead.assign(static_cast<size_t>(n), 0);
  double mean_diag = 0;
  for (int64_t j = 0; j < n; ++j) {
    r.dead[static_cast<size_t>(j)] = hp[j * n + j] == 0;  // no calibration input reaches this column
    if (r.dead[static_cast<size_t>(j)]) hp[j * n + j] = 1;
    mean_diag += hp[j * n + j] / n;
  }
  for (int64_t j = 0; j < n; ++j) hp[j * n + j] += opt.damp * mean_diag;
  if (!inverse_upper_factor(hp, n))
    throw Error("GPTQ: the Hessian is not positive definite even with dampening " + std::to_string(opt.damp) +
                " (raise it, or give more calibration text)");
  return r;
}

GptqLayer gptq_quantize(const float* w_in, int64_t n_out, int64_t n_in, std::vector<double> h, const GptqOptions& opt) {
  return gptq_quantize(w_in, n_out, n_in, gptq_prepare(std::move(h), n_in, opt), opt);
}

GptqLayer gptq_quantize(const float* w_in, int64_t n_out, int64_t n_in, const GptqHessian& hess, const GptqOptions& opt) {
  check_options(opt, n_in);
  if (hess.n != n_in) throw Error("GPTQ: Hessian of the wrong size");
  const int maxq = (1 << opt.bits) - 1;
  const int64_t gs = opt.group_size == -1 ? n_in : opt.group_size, n = n_in;
  const std::vector<int64_t>& perm = hess.perm;
  // Working copy in the order the columns are quantized.
  std::vector<double> w(static_cast<size_t>(n_out * n));
  for (int64_t o = 0; o < n_out; ++o)
    for (int64_t j = 0; j < n; ++j) w[o * n + j] = hess.dead[static_cast<size_t>(j)] ? 0.0 : w_in[o * n_in + perm[j]];
  const std::vector<double>& u = hess.u;  // H^-1 = U^T U

  GptqLayer out = empty_layer(n_out, n_in, gs);
  std::vector<Grid> grid(static_cast<size_t>(n_out));
  std::vector<double> err(static_cast<size_t>(n_out * opt.block));
  // Threads only where a column's work is worth a dispatch (several per column).
  const bool wide = n_out * std::min(opt.block, n) >= (1 << 16);
  const int64_t grain = wide ? 1 : n_out;  // parallel_for runs one chunk inline
  for (int64_t i1 = 0; i1 < n; i1 += opt.block) {
    const int64_t i2 = std::min(n, i1 + opt.block), nb = i2 - i1;
    for (int64_t i = i1; i < i2; ++i) {
      const int64_t g = i / gs;
      if (i % gs == 0) {  // the group's grid, from the columns as the updates so far left them
        parallel_for(n_out, grain, [&](int64_t o0, int64_t o1) {
          for (int64_t o = o0; o < o1; ++o) {
            grid[static_cast<size_t>(o)] = find_grid(&w[o * n + i], std::min(gs, n - i), maxq, opt.sym);
            out.scales[static_cast<size_t>(g * n_out + o)] = f32_to_f16(grid[static_cast<size_t>(o)].scale);
            out.zeros[static_cast<size_t>(g * n_out + o)] = grid[static_cast<size_t>(o)].zero;
          }
        });
      }
      out.g_idx[static_cast<size_t>(perm[i])] = static_cast<int32_t>(g);
      const double d = u[i * n + i];
      parallel_for(n_out, grain, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
          double* row = &w[o * n];
          const Grid& gr = grid[static_cast<size_t>(o)];
          const int qv = quantize_value(row[i], gr, maxq);
          out.q[static_cast<size_t>(o * n_in + perm[i])] = qv;
          const double e = (row[i] - static_cast<double>(gr.scale) * (qv - gr.zero)) / d;
          err[static_cast<size_t>(o * opt.block + (i - i1))] = e;
          sub_scaled(row + i + 1, &u[i * n + i + 1], e, i2 - i - 1);  // within the block: at once
        }
      });
    }
    // The block's errors onto every later column, in one pass (the lazy batch update).
    parallel_for(n_out, 1, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o)
        for (int64_t k = 0; k < nb; ++k) {
          const double e = err[static_cast<size_t>(o * opt.block + k)];
          const double* ur = &u[(i1 + k) * n];
          double* row = &w[o * n];
          sub_scaled(row + i2, ur + i2, e, n - i2);
        }
    });
  }
  return out;
}

GptqLayer rtn_quantize(const float* w, int64_t n_out, int64_t n_in, const GptqOptions& opt) {
  check_options(opt, n_in);
  const int maxq = (1 << opt.bits) - 1;
  const int64_t gs = opt.group_size == -1 ? n_in : opt.group_size;
  GptqLayer out = empty_layer(n_out, n_in, gs);
  for (int64_t i = 0; i < n_in; ++i) out.g_idx[static_cast<size_t>(i)] = static_cast<int32_t>(i / gs);
  parallel_for(n_out, 1, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t g = 0; g < out.n_groups; ++g) {
        const int64_t i0 = g * gs, i1 = std::min(n_in, i0 + gs);
        const Grid gr = find_grid(w + o * n_in + i0, i1 - i0, maxq, opt.sym);
        out.scales[static_cast<size_t>(g * n_out + o)] = f32_to_f16(gr.scale);
        out.zeros[static_cast<size_t>(g * n_out + o)] = gr.zero;
        for (int64_t i = i0; i < i1; ++i) out.q[static_cast<size_t>(o * n_in + i)] = quantize_value(w[o * n_in + i], gr, maxq);
      }
  });
  return out;
}

}  // namespace basalt
