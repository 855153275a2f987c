// SPDX-License-Identifier: MIT
// basalt quantize IN OUT: an HF folder or a GGUF file to a GPTQ checkpoint
// (quant/gptq/gptq_model.h does the work, quant/gptq/gptq_checkpoint.h the writing),
// with a progress line and its ETA on stderr.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/error.h"
#include "core/model/gptq_config.h"
#include "core/util/utf8.h"
#include "quant/gptq/gptq_checkpoint.h"
#include "quant/gptq/gptq_model.h"
#include "tools/basalt/common.h"

namespace basalt::cli {

namespace {

struct QuantizeOptions {
  ModelOptions model;
  std::string out, method = "gptq", calib;
  int bits = 4;
  int64_t group_size = 128;
  bool act_order = false, asym = false;
  int64_t samples = 128, seq_len = 512;
  double damp = 0.01;
  uint64_t seed = 0;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (!is_valid_utf8(text)) throw Error(path + " is not valid UTF-8");
  return text;
}

// `samples` windows of seq_len tokens at random places in the text (BOS first
// where the model adds one), the same for the same seed.
std::vector<std::vector<int32_t>> calibration_windows(const Tokenizer& tok, const std::string& text, const QuantizeOptions& o) {
  const std::vector<int32_t> tokens = tok.encode(text, false, false);
  const bool bos = tok.add_bos() && tok.bos_id() >= 0;
  const int64_t n = static_cast<int64_t>(tokens.size()), body = std::min<int64_t>(o.seq_len - (bos ? 1 : 0), n);
  if (body < 16) throw Error(o.calib + " has " + std::to_string(n) + " tokens: too little calibration text (16 at least)");
  std::mt19937_64 rng(o.seed);
  std::vector<std::vector<int32_t>> windows;
  for (int64_t s = 0; s < o.samples; ++s) {
    const int64_t start = static_cast<int64_t>(rng() % static_cast<uint64_t>(n - body + 1));
    std::vector<int32_t> w;
    if (bos) w.push_back(tok.bos_id());
    w.insert(w.end(), tokens.begin() + start, tokens.begin() + start + body);
    windows.push_back(std::move(w));
  }
  return windows;
}

std::string describe(const QuantizeOptions& o) {
  std::string s = (o.method == "gptq" ? "GPTQ " : "RTN ") + std::to_string(o.bits) + "-bit ";
  s += o.group_size == -1 ? "per-row" : "g" + std::to_string(o.group_size);
  if (o.act_order) s += " act-order";
  return s + (o.asym ? " asym" : " sym");
}

void run_quantize(const QuantizeOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(o.out, ec)) throw Error(o.out + " exists already: give a new folder (nothing is overwritten)");
  if (o.method == "rtn" && o.act_order) throw Error("--act-order orders GPTQ's columns: it needs --method gptq");
  if (o.method == "gptq" && o.calib.empty()) throw Error("--method gptq needs calibration text: --calib FILE");
  if (fs::is_directory(o.model.model, ec) && read_gptq_config(o.model.model))
    throw Error(o.model.model + " is GPTQ-quantized already: quantize the checkpoint it was made from (F16/BF16/F32)");
  const std::string text = o.calib.empty() ? std::string() : read_text(o.calib);

  auto model = load_model(o.model);
  ModelQuantizeOptions q;
  q.gptq = o.method == "gptq";
  q.layer.bits = o.bits;
  q.layer.group_size = o.group_size;
  q.layer.sym = !o.asym;
  q.layer.act_order = o.act_order;
  q.layer.damp = o.damp;
  q.v2 = o.asym;  // the gptq format cannot store a zero point of 0
  q.ubatch = o.model.ubatch;
  CheckpointProvenance prov{o.method, ""};
  std::vector<std::vector<int32_t>> windows;
  if (q.gptq) {
    windows = calibration_windows(model->tokenizer(), text, o);
    prov.calibration = std::to_string(windows.size()) + " windows of " + std::to_string(windows[0].size()) + " tokens from " +
                       fs::path(o.calib).filename().string();
    std::fprintf(stderr, "basalt: %s, calibration: %s\n", describe(o).c_str(), prov.calibration.c_str());
  }

  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto progress = [&](const QuantizeProgress& p) {
    const double s = elapsed(), eta = p.fraction > 0 ? s * (1 - p.fraction) / p.fraction : 0;
    char bar[21];
    for (int i = 0; i < 20; ++i) bar[i] = i < static_cast<int>(p.fraction * 20) ? '#' : '.';
    bar[20] = 0;
    std::fprintf(stderr, "\rbasalt: quantize [%s] %3.0f%% block %lld/%lld %-11s %.0f s, ETA %.0f s   ", bar, p.fraction * 100,
                 static_cast<long long>(p.layer + 1), static_cast<long long>(p.n_layer), p.stage, s, eta);
  };
  const auto layers = quantize_model(*model, windows, q, progress);
  std::fprintf(stderr, "\n");
  write_gptq_checkpoint(*model, o.model.model, layers, q, prov, o.out);
  uintmax_t bytes = 0;
  for (const auto& e : fs::directory_iterator(o.out, ec))
    if (e.is_regular_file(ec)) bytes += e.file_size(ec);
  std::fprintf(stderr, "basalt: wrote %s (%s, %.1f MB) in %.0f s\n", o.out.c_str(), describe(o).c_str(), bytes / 1e6, elapsed());
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  CLI::App* sub = app.add_subcommand("quantize", "quantize an HF folder or GGUF file into a GPTQ checkpoint (GPTQ or round-to-nearest)");
  sub->add_option("in", o->model.model, "HF model folder (F32/F16/BF16) or GGUF file")->required();
  sub->add_option("out", o->out, "the GPTQ checkpoint folder to write (must not exist)")->required();
  sub->add_option("-t,--threads", o->model.threads, "threads (default: physical cores)")->check(CLI::Range(0, 1024));
  sub->add_option("--method", o->method, "gptq (Frantar et al., 2022) or rtn (round-to-nearest, for comparison)")
      ->check(CLI::IsMember({"gptq", "rtn"}));
  sub->add_option("--bits", o->bits, "bits per weight")->check(CLI::IsMember({4, 8}));
  sub->add_option("--group-size", o->group_size, "inputs per scale and zero point (a multiple of 32), or -1 for one per row");
  sub->add_flag("--act-order", o->act_order, "quantize columns by decreasing Hessian diagonal (desc_act)");
  sub->add_flag("--asym,!--sym", o->asym, "asymmetric grid with a zero point per group (default: symmetric)");
  sub->add_option("--calib", o->calib, "UTF-8 calibration text (required for gptq)");
  sub->add_option("--samples", o->samples, "calibration windows")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--seq-len", o->seq_len, "tokens per calibration window")->check(CLI::Range(int64_t{16}, int64_t{1} << 20));
  sub->add_option("--damp", o->damp, "added to H's diagonal, times its mean")->check(CLI::Range(0.0, 10.0));
  sub->add_option("--seed", o->seed, "where the calibration windows start");
  sub->add_option("-b,--ubatch", o->model.ubatch, "tokens per calibration batch")->check(CLI::Range(int64_t{1}, int64_t{65536}));
  sub->callback([o] { run_quantize(*o); });
}

}  // namespace basalt::cli
