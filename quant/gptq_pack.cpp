// SPDX-License-Identifier: MIT
#include "quant/gptq_pack.h"

#include <algorithm>

#include "core/error.h"
#include "quant/convert_gptq.h"

namespace basalt {

namespace {

// Values packed `32 / bits` to a little-endian word, the first in the low bits.
void put(std::vector<int32_t>& words, int64_t index, int bits, uint32_t value) {
  const int per = 32 / bits;
  uint32_t& w = reinterpret_cast<uint32_t&>(words[static_cast<size_t>(index / per)]);
  w |= value << (index % per * bits);
}

uint32_t get(const std::vector<int32_t>& words, int64_t index, int bits) {
  const int per = 32 / bits;
  return (static_cast<uint32_t>(words[static_cast<size_t>(index / per)]) >> (index % per * bits)) & ((1u << bits) - 1);
}

}  // namespace

GptqPacked gptq_pack(const GptqLayer& l, const GptqOptions& opt, bool v2) {
  const int bits = opt.bits;
  if (bits != 4 && bits != 8) throw Error("GPTQ checkpoints are written with 4 or 8 bits, not " + std::to_string(bits));
  const int per = 32 / bits;
  if (l.n_out % per || l.n_in % per) throw Error("GPTQ: a layer of " + std::to_string(l.n_out) + " x " + std::to_string(l.n_in) +
                                                 " does not pack into 32-bit words of " + std::to_string(bits) + "-bit values");
  GptqPacked p;
  p.bits = bits, p.v2 = v2, p.n_out = l.n_out, p.n_in = l.n_in, p.n_groups = l.n_groups, p.group_size = opt.group_size;
  p.qweight.assign(static_cast<size_t>(l.n_in / per * l.n_out), 0);
  for (int64_t o = 0; o < l.n_out; ++o)
    for (int64_t i = 0; i < l.n_in; ++i) {  // word (i / per, o), field i % per
      const uint32_t q = static_cast<uint32_t>(l.q[static_cast<size_t>(o * l.n_in + i)]);
      reinterpret_cast<uint32_t&>(p.qweight[static_cast<size_t>(i / per * l.n_out + o)]) |= q << (i % per * bits);
    }
  p.qzeros.assign(static_cast<size_t>(l.n_groups * l.n_out / per), 0);
  for (int64_t g = 0; g < l.n_groups; ++g)
    for (int64_t o = 0; o < l.n_out; ++o) {
      const int z = l.zeros[static_cast<size_t>(g * l.n_out + o)] - (v2 ? 0 : 1);
      if (z < 0) throw Error("GPTQ: a zero point of 0 cannot be stored in the gptq format (write gptq_v2)");
      put(p.qzeros, g * l.n_out + o, bits, static_cast<uint32_t>(z));
    }
  p.scales = l.scales;
  p.g_idx = l.g_idx;
  return p;
}

GptqPacked gptq_reorder_outputs(const GptqPacked& p, const std::vector<int32_t>& rows) {
  if (static_cast<int64_t>(rows.size()) != p.n_out) throw Error("internal: output order of the wrong size");
  GptqPacked r = p;
  const int64_t words = p.n_in * p.bits / 32;
  for (int64_t w = 0; w < words; ++w)
    for (int64_t o = 0; o < p.n_out; ++o) r.qweight[static_cast<size_t>(w * p.n_out + o)] = p.qweight[static_cast<size_t>(w * p.n_out + rows[o])];
  std::fill(r.qzeros.begin(), r.qzeros.end(), 0);
  for (int64_t g = 0; g < p.n_groups; ++g)
    for (int64_t o = 0; o < p.n_out; ++o) {
      r.scales[static_cast<size_t>(g * p.n_out + o)] = p.scales[static_cast<size_t>(g * p.n_out + rows[o])];
      put(r.qzeros, g * p.n_out + o, p.bits, get(p.qzeros, g * p.n_out + rows[o], p.bits));
    }
  return r;
}

GptqPacked gptq_concat_outputs(const std::vector<const GptqPacked*>& parts) {
  if (parts.empty()) throw Error("internal: no layers to concatenate");
  const GptqPacked& first = *parts[0];
  GptqPacked r = first;
  r.n_out = 0;
  for (const GptqPacked* p : parts) {
    if (p->bits != first.bits || p->v2 != first.v2 || p->n_in != first.n_in || p->n_groups != first.n_groups ||
        p->group_size != first.group_size || p->g_idx != first.g_idx)
      throw Error("GPTQ: layers stored as one tensor must share bits, groups and input order");
    r.n_out += p->n_out;
  }
  const int per = 32 / first.bits;
  const int64_t words = first.n_in / per;
  r.qweight.assign(static_cast<size_t>(words * r.n_out), 0);
  r.qzeros.assign(static_cast<size_t>(first.n_groups * r.n_out / per), 0);
  r.scales.assign(static_cast<size_t>(first.n_groups * r.n_out), 0);
  int64_t at = 0;  // the part's first output
  for (const GptqPacked* p : parts) {
    auto copy = [](const auto& src, auto& dst, int64_t rows, int64_t src_cols, int64_t dst_cols, int64_t dst_at) {
      for (int64_t i = 0; i < rows; ++i)
        std::copy_n(src.begin() + i * src_cols, src_cols, dst.begin() + i * dst_cols + dst_at);
    };
    copy(p->qweight, r.qweight, words, p->n_out, r.n_out, at);
    copy(p->scales, r.scales, first.n_groups, p->n_out, r.n_out, at);
    copy(p->qzeros, r.qzeros, first.n_groups, p->n_out / per, r.n_out / per, at / per);
    at += p->n_out;
  }
  return r;
}

Weight gptq_packed_weight(const GptqPacked& p, const std::string& name) {
  const int per = 32 / p.bits;
  auto view = [&](StDtype dtype, std::vector<int64_t> shape, const void* data, size_t bytes) {
    return StTensor{name, dtype, std::move(shape), static_cast<const uint8_t*>(data), bytes, &name, nullptr};
  };
  const StTensor qweight = view(StDtype::i32, {p.n_in / per, p.n_out}, p.qweight.data(), p.qweight.size() * 4);
  const StTensor qzeros = view(StDtype::i32, {p.n_groups, p.n_out / per}, p.qzeros.data(), p.qzeros.size() * 4);
  const StTensor scales = view(StDtype::f16, {p.n_groups, p.n_out}, p.scales.data(), p.scales.size() * 2);
  const StTensor g_idx = view(StDtype::i32, {p.n_in}, p.g_idx.data(), p.g_idx.size() * 4);
  GptqParams params;
  params.bits = p.bits;
  params.v2 = p.v2;
  params.group_size = p.group_size;
  return weight_from_gptq({&qweight, &qzeros, &scales, &g_idx}, params, p.n_out, p.n_in, name);
}

std::vector<StTensorOut> gptq_tensors_out(const GptqPacked& p, const std::string& prefix) {
  const int per = 32 / p.bits;
  return {{prefix + ".qweight", StDtype::i32, {p.n_in / per, p.n_out}, p.qweight.data()},
          {prefix + ".qzeros", StDtype::i32, {p.n_groups, p.n_out / per}, p.qzeros.data()},
          {prefix + ".scales", StDtype::f16, {p.n_groups, p.n_out}, p.scales.data()},
          {prefix + ".g_idx", StDtype::i32, {p.n_in}, p.g_idx.data()}};
}

}  // namespace basalt
