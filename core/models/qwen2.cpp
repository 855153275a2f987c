// SPDX-License-Identifier: MIT
// Qwen2: the llama graph with biases on Q, K and V and the NeoX RoPE pairing
// in GGUF files too; config.json names a sliding window that
// use_sliding_window (false unless given) switches off.
#include "core/models/arch.h"
#include "core/models/blocks.h"

namespace basalt {

const TensorNames& llama_gguf_names();  // core/models/llama.cpp: Qwen2 uses the same names
const TensorNames& llama_hf_names();

const ArchDescriptor& qwen2_arch() {
  static const ArchDescriptor a{"qwen2",
                                {{"Qwen2ForCausalLM", "qwen2"}},
                                RopeStyle::neox,
                                /*attn_bias=*/true,
                                /*hf_sliding_window=*/false,
                                /*hf_swa_period=*/0,
                                llama_gguf_names(),
                                llama_hf_names(),
                                build_llama_graph};
  return a;
}

}  // namespace basalt
