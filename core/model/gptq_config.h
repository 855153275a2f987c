// SPDX-License-Identifier: MIT
// The GPTQ quantization config of an HF model folder, wherever it lives:
// config.json's quantization_config, quantize_config.json (AutoGPTQ) or
// quant_config.json.
#pragma once

#include <optional>
#include <string>

#include "quant/convert_gptq.h"

namespace basalt {

struct GptqConfig {
  GptqParams params;          // bits, group_size, v2 (from checkpoint_format)
  bool desc_act = false;      // act-order (g_idx says the groups; static_groups needs nothing more)
  bool sym = true;
  std::string source;         // the file it came from, for messages
};

// nullopt when the folder says nothing of quantization. Error naming the file
// and key for other methods (AWQ, ...), unsupported bits, group sizes or
// checkpoint formats, and malformed values.
std::optional<GptqConfig> read_gptq_config(const std::string& dir);
std::optional<GptqConfig> gptq_config_from_text(const std::string& json_text, const std::string& where, bool nested);

}  // namespace basalt
