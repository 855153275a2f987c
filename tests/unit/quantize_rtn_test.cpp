// SPDX-License-Identifier: MIT
// --quantize: an F32 model quantized at load must hold exactly the bytes of
// the Q8_0 / Q4_0 GGUF that gguf-py (llama.cpp's reference rounding) makes
// from the same weights (tests/python/make_model.py draws the same values
// for every type), dense and MoE; and what cannot be quantized says why.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "core/model/model.h"
#include "quant/quantize_rtn.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

std::string make(const std::string& dir, const std::string& name, const std::string& args) {
  const std::string path = dir + "/" + name + ".gguf";
  const std::string cmd = std::string(BASALT_PYTHON) + " " + test::source_dir() + "/tests/python/make_model.py " + path +
                          " --n-embd 128 --n-ff 256 --n-layer 2 --seed 5 " + args;
  if (test::run_command(cmd) != 0) ADD_FAILURE() << "failed: " << cmd;
  return path;
}

void expect_same_bytes(const Weight& got, const Weight& want) {
  ASSERT_EQ(got.format, want.format) << want.name;
  ASSERT_EQ(got.bits, want.bits) << want.name;
  ASSERT_EQ(got.rows, want.rows) << want.name;
  ASSERT_EQ(got.mat_rows, want.mat_rows) << want.name;
  ASSERT_EQ(got.total_bytes(), want.total_bytes()) << want.name;
  EXPECT_EQ(std::memcmp(got.data, want.data, want.total_bytes()), 0) << want.name << " differs from the GGUF's";
}

std::vector<const Weight*> layer_weights(const Model& m) {
  std::vector<const Weight*> out;
  for (int64_t i = 0; i < m.spec().n_layer; ++i) {
    const LayerWeights& l = m.layer(i);
    for (const Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.gate_exps, &l.up_exps, &l.down_exps})
      if (w->rows > 0) out.push_back(w);
  }
  return out;
}

void check(const std::string& extra) {
  const std::string dir = test::temp_dir("quantize_rtn");
  const std::string f32 = make(dir, "f32", "--type f32 " + extra);
  for (RtnType t : {RtnType::q8_0, RtnType::q4_0}) {
    const std::string gguf = make(dir, rtn_type_name(t), std::string("--type ") + rtn_type_name(t) + " " + extra);
    LoadOptions opt;
    opt.quantize = t;
    const auto got = Model::load(f32, opt);
    const auto want = Model::load(gguf);
    const auto g = layer_weights(*got), w = layer_weights(*want);
    ASSERT_EQ(g.size(), w.size());
    for (size_t i = 0; i < g.size(); ++i) expect_same_bytes(*g[i], *w[i]);
    if (t == RtnType::q8_0) {  // q4 keeps these two in q8_0 by design
      expect_same_bytes(got->token_embd(), want->token_embd());
      expect_same_bytes(got->output(), want->output());
    } else {
      EXPECT_EQ(got->token_embd().bits, 8);
      EXPECT_EQ(got->output().bits, 8);
    }
    if (got->spec().is_moe()) {
      EXPECT_EQ(got->layer(0).router.format, WeightFormat::f32);  // the router stays dense
    }
  }
}

TEST(QuantizeAtLoad, DenseModelEqualsItsGgufQuantization) { check(""); }
TEST(QuantizeAtLoad, MoeModelEqualsItsGgufQuantization) { check("--experts 4 --experts-used 2"); }

TEST(QuantizeAtLoad, ColumnsNotAMultipleOf32AreAnError) {
  Weight w;
  w.name = "odd";
  w.format = WeightFormat::f32;
  w.rows = w.mat_rows = 2;
  w.cols = 40;
  w.row_bytes = 160;
  std::vector<float> data(80, 1.0f);
  w.data = reinterpret_cast<const uint8_t*>(data.data());
  try {
    quantize_rtn(w, RtnType::q8_0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of 32"), std::string::npos) << e.what();
  }
}

TEST(QuantizeAtLoad, Names) {
  EXPECT_EQ(parse_rtn_type("q8"), RtnType::q8_0);
  EXPECT_EQ(parse_rtn_type("q4_0"), RtnType::q4_0);
  EXPECT_FALSE(parse_rtn_type("q5"));
}

}  // namespace
}  // namespace basalt
