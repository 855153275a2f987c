// SPDX-License-Identifier: MIT
// Round-to-nearest quantization of dense weights at load (`--quantize`), with
// llama.cpp's Q8_0 and Q4_0 rounding rules exactly (as gguf-py implements
// them), so an F16/BF16/F32 model quantized here holds the same bytes as its
// Q8_0 / Q4_0 GGUF.
#pragma once

#include <optional>
#include <string>

#include "quant/weight.h"

namespace basalt {

enum class RtnType { q8_0, q4_0 };

// "q8" / "q4" (also "q8_0", "q4_0"); nullopt for anything else.
std::optional<RtnType> parse_rtn_type(const std::string& s);
const char* rtn_type_name(RtnType t);

// A qa weight from a dense one (f32, f16, bf16; columns a multiple of 32).
// Stacked experts stay stacked. Error for other formats or shapes.
Weight quantize_rtn(const Weight& dense, RtnType type);

}  // namespace basalt
