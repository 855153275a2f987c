// SPDX-License-Identifier: MIT
// basalt-dump-logits MODEL OUT.f32 ID...: writes the logits of every position
// ([n_tokens][n_vocab] float32, little-endian) for the forward-pass tests.
// basalt-dump-logits MODEL OUT.f32 --weight NAME: writes the weight NAME as
// the engine holds it, dequantized ([rows][cols] float32, columns in the
// model's input order; a tensor split at load, its parts' rows in order),
// for the format tests.
// Options through the environment: BASALT_UBATCH (prefill chunk, default 512),
// BASALT_QUANTIZE (q8 or q4: dense weights quantized at load, as --quantize),
// BASALT_GPU (a GPU placement, as --gpu; an error if nothing gets offloaded),
// BASALT_GPU_MEMORY_MIB (as --gpu-memory), BASALT_WINDOW and
// BASALT_ATTENTION_SINKS (as --window and --attention-sinks).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/engine/builtin_backends.h"
#include "core/error.h"
#include "core/graph/offload.h"
#include "core/runtime/executor.h"
#include "core/model/model.h"
#include "core/util/threads.h"
#include "cpu/attention.h"

namespace {

bool write_floats(const char* path, const std::vector<float>& v) {
  FILE* f = std::fopen(path, "wb");
  const bool ok = f && std::fwrite(v.data(), sizeof(float), v.size(), f) == v.size();
  if (f) std::fclose(f);
  if (!ok) std::fprintf(stderr, "cannot write %s\n", path);
  return ok;
}

// The weight NAME, or the parts a loader split it into ("NAME[0:64]", "NAME[64:96]", ...: Phi-3's
// fused layers), their rows one after the other.
int dump_weight(const basalt::Model& model, const std::string& name, const char* out) {
  std::vector<float> all, row;
  for (const basalt::Weight* w : model.weights()) {
    if (w->name != name && w->name.rfind(name + "[", 0) != 0) continue;
    row.resize(static_cast<size_t>(w->cols));
    const size_t at = all.size();
    all.resize(at + static_cast<size_t>(w->rows * w->cols));
    for (int64_t r = 0; r < w->rows; ++r) {
      basalt::dequantize_row(*w, r, row.data());
      const int32_t* perm = w->perm_of(r / w->mat_rows);
      for (int64_t k = 0; k < w->cols; ++k)  // column k multiplies input perm[k]
        all[at + static_cast<size_t>(r * w->cols + (perm ? perm[k] : k))] = row[static_cast<size_t>(k)];
    }
  }
  if (all.empty()) {
    std::fprintf(stderr, "error: no weight named %s\n", name.c_str());
    return 1;
  }
  return write_floats(out, all) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  basalt::prefer_passive_openmp(argv);  // as the basalt command runs
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL OUT.f32 TOKEN_ID...\n", argv[0]);
    return 2;
  }
  basalt::register_builtin_backends();
  try {
    basalt::LoadOptions load;
    if (const char* q = std::getenv("BASALT_QUANTIZE")) {
      load.quantize = basalt::parse_rtn_type(q);
      if (!load.quantize) throw basalt::Error(std::string("BASALT_QUANTIZE=") + q + ": expected q8 or q4");
    }
    if (const char* w = std::getenv("BASALT_WINDOW")) load.window = std::atoll(w);  // basalt --window
    if (const char* s = std::getenv("BASALT_ATTENTION_SINKS")) load.attention_sinks = std::atoll(s);
    auto model = basalt::Model::load(argv[1], load);
    if (std::string(argv[3]) == "--weight") return dump_weight(*model, argc > 4 ? argv[4] : "", argv[2]);
    std::vector<int32_t> ids;
    for (int i = 3; i < argc; ++i) ids.push_back(static_cast<int32_t>(std::stol(argv[i])));
    const int64_t n = static_cast<int64_t>(ids.size()), V = model->spec().n_vocab;
    const char* ub = std::getenv("BASALT_UBATCH");
    const int64_t ubatch = ub ? std::max(1L, std::atol(ub)) : 512;
    const char* kv_type = std::getenv("BASALT_KV_TYPE");
    // Sliding-window layers keep rings, as in a Session (core/graph/kv_cache.h).
    basalt::KvCache kv(model->spec(), n, 1, kv_type ? basalt::parse_kv_type(kv_type) : basalt::KvType::f16, std::min(ubatch, n));
    basalt::OffloadOptions offload;
    if (const char* g = std::getenv("BASALT_GPU")) offload.gpu = g;
    if (const char* m = std::getenv("BASALT_GPU_MEMORY_MIB")) offload.memory_mib = std::atoll(m);
    basalt::Executor exec(*model, kv, kv.run_tokens(), offload);
    if (!exec.offload_plan().empty()) std::fprintf(stderr, "%s\n", exec.offload_plan().c_str());
    // What the CPU's attention kernels round (cpu/attention.h), by the name the
    // forward tests' reference takes (tests/python/check_forward.py).
    const basalt::Placement placed = basalt::parse_placement(offload.gpu);
    const bool gpu_attention = exec.offloading() && (placed.attn || placed.all || placed.auto_pick);
    if (!gpu_attention)
      std::fprintf(stderr, "attention dots: %s\n", basalt::cpu::attention_dots_name(basalt::cpu::attention_dots(
                                                        basalt::selected_isa(), kv.type(), model->spec().head_dim)));
    if (basalt::parse_placement(offload.gpu).any() && !exec.offloading())
      throw basalt::Error("BASALT_GPU=" + offload.gpu + " but nothing runs on a GPU: " + exec.offload_plan());
    std::vector<float> logits(static_cast<size_t>(n * V));
    for (int64_t i = 0; i < n; i += exec.max_batch()) {
      basalt::Batch b;
      for (int64_t j = i; j < std::min(n, i + exec.max_batch()); ++j) b.add(ids[j], static_cast<int32_t>(j), 0, true);
      const float* out = exec.run(b);
      std::copy(out, out + b.size() * V, logits.begin() + i * V);
    }
    if (!write_floats(argv[2], logits)) return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
