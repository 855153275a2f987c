// SPDX-License-Identifier: MIT
#include "cpu/onednn_matmul.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/util/half.h"
#include "core/util/thread_pool.h"
#include "cpu/isa.h"

#if BASALT_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>
#endif

namespace basalt {

#if BASALT_ONEDNN

namespace {

using dnnl::memory;
using Dims = memory::dims;
using Dt = memory::data_type;

// f16 weights are widened to f32 in panels of this many rows (a few MB).
constexpr int64_t kPanelRows = 256;

// A row-major matrix [rows][cols] with leading dimension ld, as oneDNN sees it.
memory::desc matrix(Dt dt, int64_t rows, int64_t cols, int64_t ld) { return memory::desc(Dims{rows, cols}, dt, Dims{ld, 1}); }
// W rows viewed as the matmul's B = W^T: [cols][rows], element (k, n) at n * ld + k.
memory::desc transposed(Dt dt, int64_t rows, int64_t cols, int64_t ld) { return memory::desc(Dims{cols, rows}, dt, Dims{1, ld}); }

// One engine, and the primitives made so far (creating one costs about a
// millisecond; prefill reuses a handful of shapes).
class Onednn {
 public:
  static Onednn& get() {
    static Onednn instance;
    return instance;
  }

  // A forced BASALT_ISA=avx2 (avxvnni, avx512) caps oneDNN too, so that one
  // machine can measure what a CPU with only that runs (avx512: no AMX tiles
  // for bf16). oneDNN takes this only before its first use.
  Onednn() {
    if (selected_isa() == Isa::avx2) dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
    if (selected_isa() == Isa::avxvnni) dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2_vnni);
    if (selected_isa() == Isa::avx512) dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core_bf16);
    engine_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
  }

  const dnnl::engine& engine() const { return engine_; }

  // nullptr where oneDNN has no implementation (bf16 below AVX-512).
  const dnnl::matmul* matmul(Dt src_dt, Dt w_dt, int64_t m, int64_t n, int64_t k, int64_t ldx, int64_t ldw, int64_t ldy) {
    const auto key = std::make_tuple(static_cast<int>(src_dt), static_cast<int>(w_dt), m, n, k, ldx, ldw, ldy);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      if (cache_.size() >= kMaxPrimitives) cache_.clear();
      std::optional<dnnl::matmul> prim;
      try {
        const dnnl::matmul::desc d(matrix(src_dt, m, k, ldx), transposed(w_dt, n, k, ldw), matrix(Dt::f32, m, n, ldy));
        prim = dnnl::matmul(dnnl::matmul::primitive_desc(d, engine_));
      } catch (const dnnl::error& e) {
        if (e.status != dnnl_unimplemented) throw;
      }
      it = cache_.emplace(key, std::move(prim)).first;
    }
    return it->second ? &*it->second : nullptr;
  }

  // Converts a [rows][cols] matrix between types (f32 -> bf16).
  void convert(Dt from, const void* src, int64_t ld_src, Dt to, void* dst, int64_t rows, int64_t cols) {
    memory::desc s = matrix(from, rows, cols, ld_src), d = matrix(to, rows, cols, cols);
    memory ms(s, engine_, const_cast<void*>(src)), md(d, engine_, dst);
    dnnl::stream stream(engine_);
    dnnl::reorder(ms, md).execute(stream, ms, md);
    stream.wait();
  }

 private:
  static constexpr size_t kMaxPrimitives = 256;
  dnnl::engine engine_;
  std::mutex mutex_;
  std::map<std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>, std::optional<dnnl::matmul>> cache_;
};

// f16 rows [rows][cols] to f32 (oneDNN 2.6's own f16 reorder is a slow reference loop).
void widen_f16_rows(const uint8_t* src, float* dst, int64_t rows, int64_t cols) {
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* s = src + r * cols * 2;
      float* d = dst + r * cols;
#if defined(BASALT_X86)
      if (cpu_supports(Isa::avx2)) {
        kernels::widen_f16_avx2(s, d, cols);
        continue;
      }
#endif
      for (int64_t i = 0; i < cols; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        d[i] = f16_to_f32(h);
      }
    }
  });
}

void run(const dnnl::matmul& mm, Dt src_dt, const void* x, int64_t m, int64_t k, int64_t ldx, Dt w_dt, const void* w, int64_t n,
         int64_t ldw, float* y, int64_t ldy) {
  Onednn& o = Onednn::get();
  memory src(matrix(src_dt, m, k, ldx), o.engine(), const_cast<void*>(x));
  memory wei(transposed(w_dt, n, k, ldw), o.engine(), const_cast<void*>(w));
  memory dst(matrix(Dt::f32, m, n, ldy), o.engine(), y);
  dnnl::stream stream(o.engine());
  mm.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
  stream.wait();
}

}  // namespace

bool onednn_available() {
  static const bool on = [] {
    const char* v = std::getenv("BASALT_ONEDNN");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

bool onednn_matmul(const MatmulArgs& a) {
  const Weight& w = *a.w;
  const int64_t m = a.n_tok, k = w.cols, n = a.r1 - a.r0;
  Onednn& o = Onednn::get();
  try {
    switch (w.format) {
      case WeightFormat::f32: {
        const dnnl::matmul* mm = o.matmul(Dt::f32, Dt::f32, m, n, k, k, k, a.ldy);
        if (!mm) return false;
        run(*mm, Dt::f32, a.x, m, k, k, Dt::f32, w.row(a.r0), n, k, a.y, a.ldy);
        break;
      }
      case WeightFormat::bf16: {
        const dnnl::matmul* mm = o.matmul(Dt::bf16, Dt::bf16, m, n, k, k, k, a.ldy);
        if (!mm) return false;
        thread_local std::vector<uint16_t> xb;
        xb.resize(static_cast<size_t>(m * k));
        o.convert(Dt::f32, a.x, k, Dt::bf16, xb.data(), m, k);
        run(*mm, Dt::bf16, xb.data(), m, k, k, Dt::bf16, w.row(a.r0), n, k, a.y, a.ldy);
        break;
      }
      case WeightFormat::f16: {
        thread_local std::vector<float> panel;
        if (!o.matmul(Dt::f32, Dt::f32, m, std::min(kPanelRows, n), k, k, k, a.ldy)) return false;
        for (int64_t p = 0; p < n; p += kPanelRows) {
          const int64_t pn = std::min(kPanelRows, n - p);
          panel.resize(static_cast<size_t>(pn * k));
          widen_f16_rows(w.row(a.r0 + p), panel.data(), pn, k);
          const dnnl::matmul* mm = o.matmul(Dt::f32, Dt::f32, m, pn, k, k, k, a.ldy);
          if (!mm) return false;
          run(*mm, Dt::f32, a.x, m, k, k, Dt::f32, panel.data(), pn, k, a.y + p, a.ldy);
        }
        break;
      }
      case WeightFormat::qa: throw Error("internal: oneDNN matmul called with quantized weights " + w.name);
    }
  } catch (const dnnl::error& e) {
    throw Error("oneDNN matmul " + w.name + " failed: " + e.what());
  }
  return true;
}

#else  // built without oneDNN

bool onednn_available() { return false; }
bool onednn_matmul(const MatmulArgs&) { return false; }

#endif

}  // namespace basalt
