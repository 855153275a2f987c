// SPDX-License-Identifier: MIT
// GGUF weight types -> engine formats: bit-exact against gguf-py's
// dequantization (an outside reference), and no format grows much.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "core/gguf/gguf.h"
#include "quant/convert_gguf.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

class Formats : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::temp_dir("formats");
    std::string out;
    int rc = test::run_command(std::string(BASALT_PYTHON) + " " + test::source_dir() +
                                   "/tests/python/make_format_fixture.py " + dir_ + " 2>&1",
                               &out);
    ASSERT_EQ(rc, 0) << out;
  }
  static std::vector<float> reference(const std::string& type) {
    std::ifstream f(dir_ + "/" + type + ".f32", std::ios::binary);
    std::vector<float> v(3 * 512);
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
    EXPECT_TRUE(f) << "missing reference for " << type;
    return v;
  }
  static std::string dir_;
};
std::string Formats::dir_;

TEST_F(Formats, ConversionIsBitExact) {
  GgufFile f = GgufFile::open(dir_ + "/formats.gguf");
  for (const std::string type : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"}) {
    SCOPED_TRACE(type);
    const GgufTensorInfo* t = f.find_tensor("t_" + type);
    ASSERT_NE(t, nullptr);
    Weight w = weight_from_gguf(*t);
    ASSERT_EQ(w.rows, 3);
    ASSERT_EQ(w.cols, 512);
    std::vector<float> ref = reference(type), row(512);
    int mismatches = 0;
    for (int64_t r = 0; r < 3; ++r) {
      dequantize_row(w, r, row.data());
      for (int i = 0; i < 512; ++i)
        if (row[i] != ref[r * 512 + i] && mismatches++ < 5)
          ADD_FAILURE() << "row " << r << " col " << i << ": " << row[i] << " != " << ref[r * 512 + i];
    }
    EXPECT_EQ(mismatches, 0);
    // Bytes per weight of a full tile of 16 rows: at most 3% above the file's
    // (Q4_K and Q5_K unpack 6-bit scales to bytes), but Q5_0's, which gains a
    // bias per block (-16 d, the 5-bit affine form): 6 bits a weight, not 5.5.
    const double file_bpw = 8.0 * t->n_bytes / t->n_elements();
    const double engine_bpw = w.format == WeightFormat::qa ? 8.0 * w.tile_bytes / (16.0 * w.cols)
                                                            : 8.0 * w.total_bytes() / t->n_elements();
    EXPECT_LE(engine_bpw, file_bpw * (type == "Q5_0" ? 1.1 : 1.03)) << w.describe();
  }
}

TEST_F(Formats, UnsupportedTypeIsNamed) {
  GgufTensorInfo t;
  t.name = "blk.0.attn_q.weight";
  t.type = GgmlType::iq2_xs;
  t.dims = {256, 4};
  try {
    weight_from_gguf(t);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("IQ2_XS"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("blk.0.attn_q.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace basalt
