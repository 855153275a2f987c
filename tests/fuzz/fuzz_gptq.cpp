// SPDX-License-Identifier: MIT
// GPTQ tensor conversion (quant/convert_gptq.h): one linear layer's qweight,
// qzeros, scales and g_idx filled from the input, with the parameters, the
// layer's size and one wrong dtype, shape or missing tensor that its first
// four bytes pick. Every tensor holds as many bytes as its shape says, as a
// safetensors file that opened guarantees.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "quant/convert_gptq.h"

namespace {

using namespace basalt;

struct Source {  // the input after its four parameter bytes, repeated as needed (zeros if empty)
  const uint8_t* data;
  size_t size, pos = 0;
  uint8_t next() { return size ? data[pos++ % size] : 0; }
};

struct Made {
  std::vector<uint8_t> bytes;
  StTensor t;
};

void make(Made& m, const char* name, StDtype dtype, std::vector<int64_t> shape, Source& src) {
  static const std::string file = "fuzz.safetensors";
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  m.bytes.resize(static_cast<size_t>(n) * st_dtype_size(dtype));
  for (uint8_t& b : m.bytes) b = src.next();
  m.t = StTensor{name, dtype, std::move(shape), m.bytes.data(), m.bytes.size(), &file, nullptr};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint8_t flags = data[0], fault = data[3] >> 4;
  GptqParams p;
  p.bits = flags & 1 ? 8 : 4;
  p.v2 = flags & 2;
  p.keep_zeros = flags & 4;
  const bool with_g_idx = flags & 8;
  const int per = 32 / p.bits;
  const int64_t n_in = 32 * (1 + data[1] % 8) + (flags & 16 ? data[1] % 7 : 0);  // now and then not whole blocks
  const int64_t n_out = per * (1 + data[2] % 16) + (flags & 32 ? 1 : 0);
  const int64_t group_sizes[] = {-1, 32, 64, 128, 96, 0, 48, n_in, -7, 256, 32, 64, 128, -1, 160, 33};
  p.group_size = group_sizes[data[3] % 16];
  if (flags & 64) p.bits = 3;  // unsupported
  const int64_t gs = p.group_size <= 0 ? n_in : p.group_size;
  const int64_t n_groups = std::max<int64_t>(1, (n_in + gs - 1) / gs);
  const int64_t in_words = std::max<int64_t>(1, n_in / per), out_words = std::max<int64_t>(1, n_out / per);

  Source src{data + 4, size - 4};
  Made qweight, qzeros, scales, g_idx;
  // fault picks the one thing a broken file gets wrong (0-7: nothing)
  make(qweight, "l.qweight", fault == 8 ? StDtype::f32 : StDtype::i32, {in_words, n_out + (fault == 9)}, src);
  make(qzeros, "l.qzeros", StDtype::i32, {n_groups + (fault == 10), out_words}, src);
  make(scales, "l.scales", fault == 11 ? StDtype::bf16 : StDtype::f16, {n_groups, n_out}, src);
  make(g_idx, "l.g_idx", StDtype::i32, {n_in - (fault == 12)}, src);
  GptqTensors t{&qweight.t, fault == 13 ? nullptr : &qzeros.t, &scales.t, with_g_idx ? &g_idx.t : nullptr};
  if (fault == 14) t.qweight = &scales.t;

  (void)gptq_uniform_stored_zero(t, p.bits);
  try {
    (void)weight_from_gptq(t, p, n_out, n_in, "l");
  } catch (const Error&) {
  }
  return 0;
}
