// SPDX-License-Identifier: MIT
// safetensors tensors (HF checkpoints) -> engine weight formats, at load.
#pragma once

#include <string>
#include <vector>

#include "core/safetensors/safetensors.h"
#include "quant/weight.h"

namespace basalt {

// A PyTorch Linear weight [n_out][n_in] in F32, F16 or BF16, borrowed from the
// mapping as it is (its rows are the engine's rows). Error for other dtypes
// or shapes, naming the tensor.
Weight weight_from_safetensors(const StTensor& t, const std::string& name);
// A vector (norm weights, biases) of any float dtype as floats.
std::vector<float> floats_from_safetensors(const StTensor& t);

}  // namespace basalt
