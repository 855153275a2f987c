// SPDX-License-Identifier: MIT
#include "quant/convert_safetensors.h"

#include <cstring>

#include "core/error.h"
#include "quant/half.h"

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

Weight stacked_weight_from_safetensors(const std::vector<const StTensor*>& experts, const std::string& name) {
  if (experts.empty()) throw Error("internal: no experts for " + name);
  Weight first = weight_from_safetensors(*experts[0], name);
  Weight w;
  w.name = name;
  w.format = first.format;
  w.mat_rows = first.rows;
  w.rows = first.rows * static_cast<int64_t>(experts.size());
  w.cols = first.cols;
  w.row_bytes = first.row_bytes;
  w.owned = aligned_alloc_bytes(static_cast<size_t>(w.rows) * w.row_bytes);
  for (size_t e = 0; e < experts.size(); ++e) {
    const StTensor& t = *experts[e];
    if (t.dtype != experts[0]->dtype || t.shape != experts[0]->shape)
      throw Error(*t.file + ": expert tensor " + t.name + " differs in type or shape from " + experts[0]->name);
    std::memcpy(w.owned.get() + e * t.n_bytes, t.data, t.n_bytes);
  }
  w.data = w.owned.get();
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
