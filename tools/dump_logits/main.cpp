// SPDX-License-Identifier: MIT
// basalt-dump-logits MODEL OUT.f32 ID...: writes the logits of every position
// ([n_tokens][n_vocab] float32, little-endian) for the forward-pass tests.
// Options through the environment: BASALT_UBATCH (prefill chunk, default 512),
// BASALT_QUANTIZE (q8 or q4: dense weights quantized at load, as --quantize).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/graph/executor.h"
#include "core/model/model.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL OUT.f32 TOKEN_ID...\n", argv[0]);
    return 2;
  }
  try {
    basalt::LoadOptions load;
    if (const char* q = std::getenv("BASALT_QUANTIZE")) {
      load.quantize = basalt::parse_rtn_type(q);
      if (!load.quantize) throw basalt::Error(std::string("BASALT_QUANTIZE=") + q + ": expected q8 or q4");
    }
    auto model = basalt::Model::load(argv[1], load);
    std::vector<int32_t> ids;
    for (int i = 3; i < argc; ++i) ids.push_back(static_cast<int32_t>(std::stol(argv[i])));
    const int64_t n = static_cast<int64_t>(ids.size()), V = model->spec().n_vocab;
    const char* ub = std::getenv("BASALT_UBATCH");
    const int64_t ubatch = ub ? std::max(1L, std::atol(ub)) : 512;
    basalt::KvCache kv(model->spec(), n, 1);
    basalt::Executor exec(*model, kv, std::min(ubatch, n));
    std::vector<float> logits(static_cast<size_t>(n * V));
    for (int64_t i = 0; i < n; i += exec.max_batch()) {
      basalt::Batch b;
      for (int64_t j = i; j < std::min(n, i + exec.max_batch()); ++j) b.add(ids[j], static_cast<int32_t>(j), 0, true);
      const float* out = exec.run(b);
      std::copy(out, out + b.size() * V, logits.begin() + i * V);
    }
    FILE* f = std::fopen(argv[2], "wb");
    if (!f || std::fwrite(logits.data(), sizeof(float), logits.size(), f) != logits.size()) {
      std::fprintf(stderr, "cannot write %s\n", argv[2]);
      return 1;
    }
    std::fclose(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
