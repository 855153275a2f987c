// SPDX-License-Identifier: MIT
// GGUF tensors -> engine weight formats, once, at load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/gguf/gguf.h"
#include "quant/weight.h"

namespace basalt {

// A 2-D tensor [n_out][n_in], or a 3-D expert tensor whose experts' rows are
// stacked. Dense types are borrowed from the mapping; quantized types are
// converted losslessly. An unsupported type is an Error naming it.
// `consumed` (optional) is told each range of t's bytes once it is converted,
// a few MB at a time, so a loader can let the file's pages go as it goes.
using ConsumedBytes = std::function<void(const uint8_t* p, size_t n)>;
Weight weight_from_gguf(const GgufTensorInfo& t, const ConsumedBytes& consumed = {});
// The bytes weight_from_gguf(t) allocates: its tiles for a quantized type
// (rows padded to whole tiles per matrix), 0 for a dense one (borrowed) or
// a tensor it would refuse. Lets a loader check memory before allocating.
size_t converted_bytes(const GgufTensorInfo& t);
// Any loadable tensor as floats (norm weights, biases).
std::vector<float> floats_from_gguf(const GgufTensorInfo& t);
bool gguf_type_loadable(GgmlType t);

}  // namespace basalt
