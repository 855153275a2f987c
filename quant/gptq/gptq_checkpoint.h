// SPDX-License-Identifier: MIT
// Writes a quantized model as a standard GPTQ checkpoint folder, the form
// the HF ecosystem (transformers/optimum, GPTQModel, vLLM) and basalt load:
//   config.json            the source's (or one made from a GGUF file's
//                          metadata) with quantization_config added
//   quantize_config.json   the same settings, for AutoGPTQ-era loaders
//   model.safetensors      qweight/qzeros/scales/g_idx per linear layer; the
//                          embedding, norms and output layer as they were
//                          (dense dtypes kept, GGUF block types as F32)
//   tokenizer files        copied from an HF folder, or written from a GGUF
//                          file's byte-level BPE vocabulary
// GGUF llama files hold Q and K rows interleaved for their RoPE: they are
// put back in HF's rotate-half order.
#pragma once

#include <string>
#include <vector>

#include "core/model/model.h"
#include "quant/gptq/gptq_model.h"

namespace basalt {

struct CheckpointProvenance {
  std::string method;       // "gptq" or "rtn" (both store the GPTQ format)
  std::string calibration;  // e.g. "128 windows of 512 tokens from FILE" ("" for rtn)
};

// source: the path the model was loaded from (an HF folder or a GGUF file).
// layers: quantize_model's result. dir must not exist yet; the folder is
// written as dir + ".partial" and renamed at the end.
void write_gptq_checkpoint(const Model& model, const std::string& source, const std::vector<std::vector<QuantizedLinear>>& layers,
                           const ModelQuantizeOptions& o, const CheckpointProvenance& provenance, const std::string& dir);

}  // namespace basalt
