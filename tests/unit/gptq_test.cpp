// SPDX-License-Identifier: MIT
// GPTQ: the quantization config wherever it lives and every unsupported or
// malformed value as an Error naming it; the layer conversion's checks of
// dtypes, shapes, group indices; sym vs asym encodings, act-order
// permutations and the zero-point formats, on small hand-made layers (the
// bit-exact checks on whole checkpoints are tests/python/check_gptq.py).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/model/gptq_config.h"
#include "quant/convert_gptq.h"
#include "core/util/half.h"

namespace basalt {
namespace {

std::string config_error(const std::string& text, bool nested = false) {
  try {
    gptq_config_from_text(text, "quantize_config.json", nested);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GptqConfig, ReadsTheFieldsAndTheirDefaults) {
  auto c = gptq_config_from_text(R"({"bits": 8, "group_size": -1, "desc_act": true, "sym": false,
                                     "checkpoint_format": "gptq_v2"})", "q.json", false);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->params.bits, 8);
  EXPECT_EQ(c->params.group_size, -1);
  EXPECT_TRUE(c->params.v2);
  EXPECT_TRUE(c->desc_act);
  EXPECT_FALSE(c->sym);
  c = gptq_config_from_text(R"({})", "q.json", false);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->params.bits, 4);
  EXPECT_EQ(c->params.group_size, 128);
  EXPECT_FALSE(c->params.v2);
  EXPECT_TRUE(c->sym);
  // config.json without a quantization_config: not quantized.
  EXPECT_FALSE(gptq_config_from_text(R"({"architectures": ["LlamaForCausalLM"]})", "config.json", true));
  c = gptq_config_from_text(R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32}})",
                            "config.json", true);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->params.group_size, 32);
}

TEST(GptqConfig, RefusesWhatItCannotRead) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"bits": 3})", "bits 3"},
      {R"({"bits": "4"})", "bits must be an integer"},
      {R"({"group_size": 48})", "group_size 48"},
      {R"({"group_size": 0})", "group_size 0"},
      {R"({"desc_act": 1})", "desc_act must be true or false"},
      {R"({"checkpoint_format": "marlin"})", "checkpoint_format \"marlin\""},
      {R"({"is_marlin_format": true})", "Marlin"},
      {R"({"quant_method": "awq"})", "quant_method \"awq\""},
      {R"([4])", "not a JSON object"},
      {R"({"bits": 4,)", "not valid JSON"},
  };
  for (const auto& [text, want] : cases) EXPECT_NE(config_error(text).find(want), std::string::npos) << text;
  EXPECT_NE(config_error(R"({"quantization_config": {"quant_method": "awq", "bits": 4}})", true).find("awq"),
            std::string::npos);
}

// One GPTQ layer [n_out][n_in] in memory, packed like the checkpoints.
struct Layer {
  int bits;
  int64_t n_out, n_in, gs;
  std::vector<int32_t> q;      // [n_in][n_out] quant values
  std::vector<int32_t> zeros;  // [groups][n_out] stored zero points
  std::vector<uint16_t> scales;
  std::vector<int32_t> g_idx;
  std::vector<uint32_t> qweight_words, qzeros_words;
  std::string file = "layer.safetensors";
  StTensor qweight, qzeros, scale_t, g_idx_t;

  int64_t groups() const { return (n_in + gs - 1) / gs; }
  GptqTensors tensors() {
    const int per = 32 / bits;
    qweight_words.assign(static_cast<size_t>(n_in / per * n_out), 0);
    for (int64_t i = 0; i < n_in; ++i)
      for (int64_t o = 0; o < n_out; ++o)
        qweight_words[static_cast<size_t>(i / per * n_out + o)] |= static_cast<uint32_t>(q[i * n_out + o]) << (i % per * bits);
    qzeros_words.assign(static_cast<size_t>(groups() * n_out / per), 0);
    for (int64_t g = 0; g < groups(); ++g)
      for (int64_t o = 0; o < n_out; ++o)
        qzeros_words[static_cast<size_t>(g * n_out / per + o / per)] |= static_cast<uint32_t>(zeros[g * n_out + o]) << (o % per * bits);
    auto make = [&](StTensor& t, const char* name, StDtype dt, std::vector<int64_t> shape, const void* data, size_t n) {
      t = StTensor{name, dt, std::move(shape), static_cast<const uint8_t*>(data), n, &file, nullptr};
      return &t;
    };
    return {make(qweight, "l.qweight", StDtype::i32, {n_in / per, n_out}, qweight_words.data(), qweight_words.size() * 4),
            make(qzeros, "l.qzeros", StDtype::i32, {groups(), n_out / per}, qzeros_words.data(), qzeros_words.size() * 4),
            make(scale_t, "l.scales", StDtype::f16, {groups(), n_out}, scales.data(), scales.size() * 2),
            g_idx.empty() ? nullptr : make(g_idx_t, "l.g_idx", StDtype::i32, {n_in}, g_idx.data(), g_idx.size() * 4)};
  }
};

Layer random_layer(int bits, int64_t n_out, int64_t n_in, int64_t gs, bool sym, bool act_order, std::mt19937& rng) {
  Layer l;
  l.bits = bits, l.n_out = n_out, l.n_in = n_in, l.gs = gs;
  const int maxq = (1 << bits) - 1;
  l.q.resize(static_cast<size_t>(n_in * n_out));
  for (auto& v : l.q) v = static_cast<int32_t>(rng() % (maxq + 1));
  l.zeros.resize(static_cast<size_t>(l.groups() * n_out));
  for (auto& z : l.zeros) z = sym ? (1 << (bits - 1)) - 1 : static_cast<int32_t>(rng() % (maxq + 1));  // gptq: zero - 1
  l.scales.resize(l.zeros.size());
  for (auto& s : l.scales) s = f32_to_f16(0.001f * static_cast<float>(1 + rng() % 100));
  std::vector<int32_t> order(static_cast<size_t>(n_in));
  for (int64_t i = 0; i < n_in; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  if (act_order) std::shuffle(order.begin(), order.end(), rng);
  l.g_idx.resize(static_cast<size_t>(n_in));
  for (int64_t k = 0; k < n_in; ++k) l.g_idx[static_cast<size_t>(order[static_cast<size_t>(k)])] = static_cast<int32_t>(k / gs);
  return l;
}

// w[o][i] as the format defines it (gptq: stored zero + 1).
float reference(const Layer& l, int64_t o, int64_t i) {
  const int64_t g = l.g_idx[static_cast<size_t>(i)];
  return f16_to_f32(l.scales[static_cast<size_t>(g * l.n_out + o)]) *
         static_cast<float>(l.q[static_cast<size_t>(i * l.n_out + o)] - (l.zeros[static_cast<size_t>(g * l.n_out + o)] + 1));
}

TEST(Gptq, LayersDequantizeExactly) {
  std::mt19937 rng(5);
  struct Case { int bits; int64_t n_out, n_in, gs; bool sym, act_order; QaScales enc; };
  const Case cases[] = {{4, 24, 256, 128, true, false, QaScales::f16_sym},  {4, 40, 192, 64, false, false, QaScales::f16_zero},
                        {4, 16, 256, 32, true, true, QaScales::f16_sym},    {4, 8, 256, 64, false, true, QaScales::f16_zero},
                        {8, 20, 160, 32, true, false, QaScales::f16_sym},   {8, 12, 256, 128, false, true, QaScales::f16_zero},
                        {4, 16, 96, 96, false, false, QaScales::f16_zero}};
  for (const Case& c : cases) {
    Layer l = random_layer(c.bits, c.n_out, c.n_in, c.gs, c.sym, c.act_order, rng);
    const Weight w = weight_from_gptq(l.tensors(), {c.bits, c.gs, false}, c.n_out, c.n_in, "l");
    EXPECT_EQ(w.scales, c.enc);
    EXPECT_EQ(w.input_perm.empty(), !c.act_order);
    std::vector<float> row(static_cast<size_t>(c.n_in));
    for (int64_t o = 0; o < c.n_out; ++o) {
      dequantize_row(w, o, row.data());
      for (int64_t k = 0; k < c.n_in; ++k) {
        const int64_t i = w.input_perm.empty() ? k : w.input_perm[static_cast<size_t>(k)];
        ASSERT_EQ(row[static_cast<size_t>(k)], reference(l, o, i)) << "bits " << c.bits << " group " << c.gs << " [" << o << "][" << i << "]";
      }
    }
  }
}

TEST(Gptq, ZeroPointFormats) {
  std::mt19937 rng(9);
  Layer l = random_layer(4, 16, 64, 32, true, false, rng);  // stores 7: the gptq format's 8 - 1
  EXPECT_EQ(gptq_uniform_stored_zero(l.tensors(), 4), 7);
  EXPECT_EQ(weight_from_gptq(l.tensors(), {4, 32, false}, 16, 64, "l").scales, QaScales::f16_sym);
  // Read as gptq_v2 the same file has zero point 7: not symmetric any more, and w = s * (q - 7).
  const Weight v2 = weight_from_gptq(l.tensors(), {4, 32, true}, 16, 64, "l");
  EXPECT_EQ(v2.scales, QaScales::f16_zero);
  std::vector<float> row(64);
  dequantize_row(v2, 3, row.data());
  EXPECT_EQ(row[5], f16_to_f32(l.scales[3]) * static_cast<float>(l.q[5 * 16 + 3] - 7));
  l.zeros[4] = 3;
  EXPECT_EQ(gptq_uniform_stored_zero(l.tensors(), 4), -1);
}

std::string layer_error(Layer& l, GptqParams p, int64_t n_out, int64_t n_in, void (*spoil)(GptqTensors&) = nullptr) {
  try {
    GptqTensors t = l.tensors();
    if (spoil) spoil(t);
    weight_from_gptq(t, p, n_out, n_in, "model.layers.0.mlp.up_proj");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gptq, MalformedLayersAreErrors) {
  std::mt19937 rng(3);
  Layer l = random_layer(4, 16, 128, 64, false, true, rng);
  EXPECT_EQ(layer_error(l, {4, 64, false}, 16, 128), "");
  EXPECT_NE(layer_error(l, {4, 64, false}, 32, 128).find("shape"), std::string::npos);
  EXPECT_NE(layer_error(l, {4, 32, false}, 16, 128).find("shape"), std::string::npos);  // 4 groups of zeros expected
  EXPECT_NE(layer_error(l, {3, 64, false}, 16, 128).find("3 bits"), std::string::npos);
  EXPECT_NE(layer_error(l, {4, 48, false}, 16, 128).find("group size 48"), std::string::npos);
  EXPECT_NE(layer_error(l, {4, 64, false}, 16, 128, [](GptqTensors& t) { t.qzeros = nullptr; }).find("qzeros is missing"),
            std::string::npos);
  EXPECT_NE(layer_error(l, {4, 64, false}, 16, 128, [](GptqTensors& t) { const_cast<StTensor*>(t.scales)->dtype = StDtype::bf16; })
                .find("BF16, expected F16"),
            std::string::npos);
  const int32_t g7 = l.g_idx[7];
  l.g_idx[7] = 2;  // only 2 groups
  EXPECT_NE(layer_error(l, {4, 64, false}, 16, 128).find("outside the 2 groups"), std::string::npos);
  l.g_idx[7] = g7;
  for (auto& g : l.g_idx)  // one input moved from group 1 to group 0: groups of 65 and 63 inputs
    if (g == 1) {
      g = 0;
      break;
    }
  EXPECT_NE(layer_error(l, {4, 64, false}, 16, 128).find("not whole blocks of 32"), std::string::npos);
}

}  // namespace
}  // namespace basalt
