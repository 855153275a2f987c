// SPDX-License-Identifier: MIT
#include "quant/convert_safetensors.h"

#include <cstring>

#include "core/error.h"
#include "core/util/half.h"

namespace basalt {

namespace {

WeightFormat dense_format(const StTensor& t, const std::string& name) {
  switch (t.dtype) {
    case StDtype::f32: return WeightFormat::f32;
    case StDtype::f16: return WeightFormat::f16;
    case StDtype::bf16: return WeightFormat::bf16;
    default: throw Error(*t.file + ": tensor " + name + " is " + st_dtype_name(t.dtype) + ", expected F32, F16 or BF16");
  }
}

size_t format_bytes(WeightFormat f) { return f == WeightFormat::f32 ? 4 : 2; }

}  // namespace

Weight weight_from_safetensors(const StTensor& t, const std::string& name) {
  if (t.shape.size() != 2 || t.shape[0] <= 0 || t.shape[1] <= 0)
    throw Error(*t.file + ": tensor " + name + " is not a matrix");
  Weight w;
  w.name = name;
  w.format = dense_format(t, name);
  w.rows = w.mat_rows = t.shape[0];
  w.cols = t.shape[1];
  w.row_bytes = static_cast<size_t>(w.cols) * format_bytes(w.format);
  w.data = t.data;
  return w;
}

std::vector<float> floats_from_safetensors(const StTensor& t) {
  const size_t n = static_cast<size_t>(t.n_elements());
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case StDtype::f32: std::memcpy(&out[i], t.data + 4 * i, 4); break;
      case StDtype::f16:
      case StDtype::bf16: {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        out[i] = t.dtype == StDtype::f16 ? f16_to_f32(h) : bf16_to_f32(h);
        break;
      }
      case StDtype::f64: {
        double d;
        std::memcpy(&d, t.data + 8 * i, 8);
        out[i] = static_cast<float>(d);
        break;
      }
      default: throw Error(*t.file + ": tensor " + t.name + " is " + st_dtype_name(t.dtype) + ", expected floats");
    }
  }
  return out;
}

}  // namespace basalt
