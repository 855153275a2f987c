// SPDX-License-Identifier: MIT
// The basalt command as a user meets it: output, exit codes, and one clear
// error line for bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

#if defined(BASALT_VULKAN)
#include "gpu/device.h"
#endif
#include "tests/unit/gguf_builder.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

struct Result {
  int rc;
  std::string out;  // stdout and stderr together
};

// env: VAR=value assignments for the command, or "".
Result basalt_cmd(const std::string& args, const std::string& stdin_text = "", const std::string& env = "") {
  std::string cmd = env + " " + std::string(BASALT_BIN_DIR) + "/basalt " + args + " 2>&1";
  if (!stdin_text.empty()) cmd = "printf '%s' '" + stdin_text + "' | " + cmd;
  else cmd += " </dev/null";
  Result r;
  r.rc = test::run_command(cmd, &r.out);
  return r;
}

std::string model_arg() { return "-m " + test::smollm2_path(); }

TEST(Cli, InfoDescribesTheModel) {
  Result r = basalt_cmd("info " + test::smollm2_path());
  ASSERT_EQ(r.rc, 0) << r.out;
  for (const char* s : {"architecture    llama", "layers          30", "Q4_1", "qa4/f16_affine", "vocabulary      49152", "KV cache",
                        "with --kv-type q8", "chat template   its own; tool calls in json format\n"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

// OpenMP (oneDNN's threads) waits passively unless the user chose a policy,
// as libgomp itself sees it (core/util/threads.h, prefer_passive_openmp):
// passive is no spinning at all, where an unset policy spins 300000 polls.
TEST(Cli, OpenMpWaitsPassivelyUnlessTheUserChose) {
  Result r = basalt_cmd("info " + test::smollm2_path(), "", "env -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("GOMP_SPINCOUNT = '0'"), std::string::npos) << r.out;
  r = basalt_cmd("info " + test::smollm2_path(), "", "OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=verbose");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("OMP_WAIT_POLICY = 'ACTIVE'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("GOMP_SPINCOUNT = '0'"), std::string::npos) << r.out;
}

TEST(Cli, GreedyRunIsDeterministicAndReportsSpeed) {
  Result a = basalt_cmd("run " + model_arg() + " -p 'The capital of France is' -n 8 --temp 0");
  Result b = basalt_cmd("run " + model_arg() + " -p 'The capital of France is' -n 8 --temp 0");
  ASSERT_EQ(a.rc, 0) << a.out;
  EXPECT_NE(a.out.find("Paris"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("tokens/s"), std::string::npos) << a.out;
  auto text = [](const std::string& s) { return s.substr(0, s.find("basalt: prefill")); };
  EXPECT_EQ(text(a.out.substr(a.out.find('\n') + 1)), text(b.out.substr(b.out.find('\n') + 1)));
}

TEST(Cli, SameSeedSameSample) {
  const std::string args = "run " + model_arg() + " -p 'Once upon a time' -n 12 --temp 1.0 --seed ";
  Result a = basalt_cmd(args + "7"), b = basalt_cmd(args + "7");
  ASSERT_EQ(a.rc, 0) << a.out;
  auto text = [](const std::string& s) { return s.substr(s.find('\n') + 1, s.find("basalt: prefill") - s.find('\n') - 1); };
  EXPECT_EQ(text(a.out), text(b.out));
}

// --json-schema-file holds the output to the schema (an instance, its
// properties in order, the run ends with the JSON); a schema basalt cannot
// enforce is one clear line before the model loads.
TEST(Cli, JsonSchemaOutputIsAnInstance) {
  const std::string schema_path = testing::TempDir() + "/cli_schema.json";
  std::ofstream(schema_path) << R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
      "country": {"type": "string", "maxLength": 30}, "population": {"type": "integer"}}, "required": ["city", "country", "population"]})";
  Result r = basalt_cmd("run " + model_arg() + " --chat -p 'Describe Paris as JSON.' -n 100 --temp 0 --json-schema-file " + schema_path);
  ASSERT_EQ(r.rc, 0) << r.out;
  const size_t begin = r.out.find("\n{"), end = r.out.rfind("}", r.out.find("basalt: prefill"));
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos && end > begin) << r.out;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(r.out.substr(begin + 1, end - begin));
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"city", "country", "population"})) << r.out;
  EXPECT_TRUE(j["city"].is_string() && j["population"].is_number_integer()) << r.out;
  EXPECT_NE(r.out.find("stop: grammar"), std::string::npos) << r.out;

  r = basalt_cmd("run " + model_arg() + " -p x --json-schema '{\"type\": \"string\", \"pattern\": \"a\"}'");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("\"pattern\" is not supported"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("loaded"), std::string::npos) << r.out;  // refused before the model loads
}

// --grammar holds the output to a GBNF grammar; a bad one is one line naming where.
TEST(Cli, GrammarOutputFollowsIt) {
  Result r = basalt_cmd("run " + model_arg() + " -p 'Is water wet? Answer:' -n 20 --temp 0.9 --seed 2 --grammar 'root ::= (\"yes\" | \"no\") \".\"'");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(r.out.find("\nyes.") != std::string::npos || r.out.find("\nno.") != std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stop: grammar"), std::string::npos) << r.out;
  r = basalt_cmd("run " + model_arg() + " -p x --grammar 'root ::= yes'");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("line 1 column 10: the rule 'yes' is used but not defined"), std::string::npos) << r.out;
}

TEST(Cli, ChatReadsTurnsFromStdin) {
  Result r = basalt_cmd("chat " + model_arg() + " -n 12 --temp 0", "What is 2+2?\\nAnd 3+3?\\n/exit\\n");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_GT(r.out.size(), 20u) << r.out;
}

// --chat-template-kwargs: the template's variables (the tiny model's template
// writes Qwen3's empty thinking for enable_thinking false); a bad value, or
// one without --chat, is refused before the model loads.
TEST(Cli, ChatTemplateKwargsReachTheTemplate) {
  const std::string model = "-m " + test::make_tiny_model("cli_template_vars");
  auto prefilled = [](const Result& r) {
    const size_t at = r.out.find("prefill ");
    return at == std::string::npos ? -1L : std::atol(r.out.c_str() + at + 8);
  };
  const Result plain = basalt_cmd("run " + model + " --chat -p hi -n 1 --temp 0");
  const Result thinking = basalt_cmd("run " + model + " --chat -p hi -n 1 --temp 0 --chat-template-kwargs '{\"enable_thinking\": true}'");
  const Result no_thinking =
      basalt_cmd("run " + model + " --chat -p hi -n 1 --temp 0 --chat-template-kwargs '{\"enable_thinking\": false}'");
  ASSERT_EQ(plain.rc, 0) << plain.out;
  EXPECT_GT(prefilled(plain), 0) << plain.out;
  EXPECT_EQ(prefilled(thinking), prefilled(plain)) << thinking.out;
  EXPECT_GT(prefilled(no_thinking), prefilled(plain) + 4) << no_thinking.out;  // <think>, </think> and newlines

  const std::pair<std::string, std::string> refused[] = {
      {"--chat --chat-template-kwargs '[1]'", "must be a JSON object"},
      {"--chat --chat-template-kwargs '{\"messages\": []}'", "cannot set messages"},
      {"--chat --chat-template-kwargs '{nope'", "not valid JSON"},
      {"--chat-template-kwargs '{}'", "--chat"},
  };
  for (const auto& [args, message] : refused) {
    const Result r = basalt_cmd("run " + model + " -p hi -n 1 " + args);
    EXPECT_NE(r.rc, 0) << args;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << ": " << r.out;
  }
}

TEST(Cli, MissingModelFileIsOneClearLine) {
  Result r = basalt_cmd("run -m /nonexistent/model.gguf -p hi");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("basalt: error: cannot open /nonexistent/model.gguf"), std::string::npos) << r.out;
}

TEST(Cli, GarbageFileIsOneClearLine) {
  const std::string path = test::temp_dir("cli") + "/garbage.gguf";
  std::ofstream(path) << "this is not a model at all";
  Result r = basalt_cmd("info " + path);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("not a GGUF file"), std::string::npos) << r.out;
}

TEST(Cli, UnsupportedArchitectureIsNamed) {
  test::GgufBuilder g;
  g.kv_str("general.architecture", "gptj");
  const std::string path = test::temp_dir("cli") + "/gptj.gguf";
  auto bytes = g.bytes();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  Result r = basalt_cmd("info " + path);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("architecture 'gptj' is not supported"), std::string::npos) << r.out;
}

TEST(Cli, PromptLongerThanContextIsAClearError) {
  Result r = basalt_cmd("run " + model_arg() + " -c 4 -p 'one two three four five six seven eight'");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("more than the context of 4"), std::string::npos) << r.out;
}

TEST(Cli, InvalidUtf8PromptDoesNotCrash) {
  Result r = basalt_cmd("run " + model_arg() + " -n 4 --temp 0 -p \"$(printf 'abc\\377\\376 def')\"");
  EXPECT_EQ(r.rc, 0) << r.out;
}

TEST(Cli, BadOptionValuesAreRejected) {
  EXPECT_NE(basalt_cmd("run " + model_arg() + " -p hi --top-p 7").rc, 0);
  EXPECT_NE(basalt_cmd("run " + model_arg() + " -p hi -n abc").rc, 0);
  EXPECT_NE(basalt_cmd("frobnicate").rc, 0);
  EXPECT_NE(basalt_cmd("run " + model_arg() + " -p hi --gpu bogus").rc, 0);
  EXPECT_NE(basalt_cmd("run " + model_arg() + " -p hi --kv-type q3").rc, 0);
}

// The q8 KV cache: the same greedy answer as f16 on the default model (the
// continuation after it may part at a near-tie: int8 keys move scores), and
// bench reports the cache's type and what a position of it costs (half of f16's, and the scales).
TEST(Cli, Q8KvCacheRunsAndBenches) {
  const std::string run = "run " + model_arg() + " -p 'The capital of France is' -n 8 --temp 0";
  Result f16 = basalt_cmd(run), q8 = basalt_cmd(run + " --kv-type q8");
  ASSERT_EQ(q8.rc, 0) << q8.out;
  auto text = [](const std::string& s) { return s.substr(s.find('\n') + 1, s.find("basalt: prefill") - s.find('\n') - 1); };
  EXPECT_EQ(text(q8.out).substr(0, 8), " Paris.\n") << q8.out;
  EXPECT_EQ(text(f16.out).substr(0, 8), " Paris.\n") << f16.out;
  Result b = basalt_cmd("bench " + model_arg() + " -p 8 -n 4 -r 1 --json --kv-type q8");
  ASSERT_EQ(b.rc, 0) << b.out;
  const nlohmann::json j = nlohmann::json::parse(b.out.substr(b.out.rfind("\n{") + 1));
  EXPECT_EQ(j["kv_type"].get<std::string>(), "q8");
  // SmolLM2: 30 layers x K and V x 3 KV heads x (64 int8 + a 4-byte scale)
  EXPECT_EQ(j["kv_position_bytes"].get<int64_t>(), 30 * 2 * 3 * (64 + 4));
  EXPECT_EQ(j["kv_bytes"].get<int64_t>(), 64 * j["kv_position_bytes"].get<int64_t>());  // 8 prompt positions: one block
  EXPECT_GT(j["tg_tokens_per_s"].get<double>(), 0);
}

// The 4-bit caches: the greedy answer survives them, and bench counts their bytes.
TEST(Cli, Q4AndK8v4KvCachesRunAndBench) {
  const std::string run = "run " + model_arg() + " -p 'The capital of France is' -n 8 --temp 0";
  auto text = [](const std::string& s) { return s.substr(s.find('\n') + 1, s.find("basalt: prefill") - s.find('\n') - 1); };
  // SmolLM2, per position: 30 layers x 3 KV heads x (K + V); q4 keys 32 bytes + 8 (an f16 step and minimum
  // per dim and 32 positions: 512 bytes per head and 64 positions), q4 values 32 bytes + 2 f16 scales a head.
  for (const auto& [type, position_bytes] : {std::pair{"q4", 30 * 3 * ((32 + 8) + (32 + 4))}, std::pair{"k8v4", 30 * 3 * ((64 + 4) + (32 + 4))}}) {
    Result r = basalt_cmd(run + " --kv-type " + type);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(text(r.out).substr(0, 7), " Paris.") << type << ": " << r.out;
    Result b = basalt_cmd("bench " + model_arg() + " -p 8 -n 4 -r 1 --json --kv-type " + type);
    ASSERT_EQ(b.rc, 0) << b.out;
    const nlohmann::json j = nlohmann::json::parse(b.out.substr(b.out.rfind("\n{") + 1));
    EXPECT_EQ(j["kv_type"].get<std::string>(), type);
    EXPECT_EQ(j["kv_position_bytes"].get<int64_t>(), position_bytes) << type;
  }
  Result bad = basalt_cmd(run + " --kv-type q2");
  EXPECT_NE(bad.rc, 0);
}

// Streaming attention: the greedy answer of a prompt inside the window is
// full attention's; past it, bench's cache is a ring (the sinks' block, then
// a 64-token window and a 64-token chunk in 2 blocks, plus one); sinks need a window.
TEST(Cli, WindowAndAttentionSinks) {
  Result r = basalt_cmd("run " + model_arg() + " -p 'The capital of France is' -n 8 --temp 0 --window 64 --attention-sinks 4");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find(" Paris."), std::string::npos) << r.out;
  Result b = basalt_cmd("bench " + model_arg() + " -p 0 -n 4 -d 1000 -b 64 -r 1 --json --window 64 --attention-sinks 4");
  ASSERT_EQ(b.rc, 0) << b.out;
  const nlohmann::json j = nlohmann::json::parse(b.out.substr(b.out.rfind("\n{") + 1));
  EXPECT_EQ(j["kv_bytes"].get<int64_t>(), (1 + 2 + 1) * 64 * j["kv_position_bytes"].get<int64_t>());
  Result bad = basalt_cmd("run " + model_arg() + " -p Hi -n 1 --attention-sinks 4");
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.out.find("--window"), std::string::npos) << bad.out;
}

// bench --json: one object with the speeds and what ran where (llama-bench's fields and ours).
TEST(Cli, BenchPrintsSpeedsAsJson) {
  Result r = basalt_cmd("bench " + model_arg() + " -p 8 -n 4 -r 2 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(r.out.rfind("\n{") + 1));
  EXPECT_GT(j["pp_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["tg_tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(j["reps"].get<int>(), 2);
  EXPECT_EQ(j["n_prompt"].get<int>(), 8);
  EXPECT_GT(j["decode_bytes"].get<double>(), 1e6);
  EXPECT_EQ(j["gpu"].get<std::string>(), "off");
  EXPECT_EQ(j["gpu_plan"].get<std::string>(), "");
  EXPECT_FALSE(j.contains("tg_roofline_pct"));
  // --roofline: decode against the read bandwidth measured beside it
  Result rl = basalt_cmd("bench " + model_arg() + " -p 0 -n 4 -r 2 --json --roofline");
  ASSERT_EQ(rl.rc, 0) << rl.out;
  const nlohmann::json jr = nlohmann::json::parse(rl.out.substr(rl.out.rfind("\n{") + 1));
  EXPECT_GT(jr["read_gbs"].get<double>(), 0.1);
  EXPECT_GT(jr["tg_roofline_pct"].get<double>(), 0);
  EXPECT_LT(jr["tg_roofline_pct"].get<double>(), 1000);  // not a unit slip (bytes for GB)
  EXPECT_GE(jr["decode_step_bytes"].get<double>(), jr["decode_bytes"].get<double>());
  // --sequences: several decoding together through the server's scheduler
  Result sq = basalt_cmd("bench " + model_arg() + " -p 0 -n 6 -d 5 -r 1 --json --sequences 3");
  ASSERT_EQ(sq.rc, 0) << sq.out;
  const nlohmann::json js = nlohmann::json::parse(sq.out.substr(sq.out.rfind("\n{") + 1));
  EXPECT_EQ(js["sequences"].get<int>(), 3);
  EXPECT_GT(js["tg_tokens_per_s"].get<double>(), 0);
  // --vs-depth0: pairs of decodes at depth 0 and at the depth, in turn, and their ratios
  Result vs = basalt_cmd("bench " + model_arg() + " -p 0 -n 4 -d 200 -r 1 --json --vs-depth0 3");
  ASSERT_EQ(vs.rc, 0) << vs.out;
  const nlohmann::json jv = nlohmann::json::parse(vs.out.substr(vs.out.rfind("\n{") + 1));
  ASSERT_EQ(jv["depth_vs_depth0_all"].size(), 3u);
  EXPECT_GT(jv["depth_vs_depth0"].get<double>(), 0.05);  // at 200 positions decode is not 20x slower...
  EXPECT_LT(jv["depth_vs_depth0"].get<double>(), 20.0);  // ...nor faster: a ratio, not a swap of its terms
  EXPECT_GT(jv["tg_depth0_tokens_per_s"].get<double>(), 0);
  EXPECT_NE(basalt_cmd("bench " + model_arg() + " -p 0 -n 4 -r 1 --vs-depth0 3").rc, 0);  // no depth: refused
#if defined(BASALT_VULKAN)
  if (!gpu::list_gpus().empty()) {
    Result g = basalt_cmd("bench " + model_arg() + " -p 8 -n 2 -r 1 --json --gpu attn");
    ASSERT_EQ(g.rc, 0) << g.out;
    const nlohmann::json jg = nlohmann::json::parse(g.out.substr(g.out.rfind("\n{") + 1));
    EXPECT_NE(jg["gpu_plan"].get<std::string>().find("attention of 30 layers"), std::string::npos) << g.out;
    EXPECT_NE(jg["gpu_plan"].get<std::string>().find("shaders: "), std::string::npos) << g.out;
    EXPECT_GT(jg["tg_tokens_per_s"].get<double>(), 0);
  }
#endif
}

// Without a Vulkan driver (VK_ICD_FILENAMES pointing nowhere), --gpu says so in
// one line and runs on the CPU; under auto a CPU driver (lavapipe) is never used.
// A build without Vulkan (the sanitizers' trees) says that instead.
TEST(Cli, GpuWithoutADeviceRunsOnTheCpu) {
#if defined(BASALT_VULKAN)
  const std::string no_device = "no Vulkan device", none_listed_says = no_device;
#else
  const std::string no_device = "this build has no GPU backend", none_listed_says = "this build has no Vulkan backend";
#endif
  const std::string run = "run " + model_arg() + " -p 'The capital of France is' -n 6 --temp 0";
  Result none = basalt_cmd(run + " --gpu all", "", "VK_ICD_FILENAMES=/nonexistent");
  ASSERT_EQ(none.rc, 0) << none.out;
  EXPECT_NE(none.out.find(no_device), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("running on the CPU"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("Paris"), std::string::npos) << none.out;
#if defined(BASALT_VULKAN)
  const std::vector<gpu::GpuInfo> gpus = gpu::list_gpus();
  Result aut = basalt_cmd(run + " --gpu auto");
  ASSERT_EQ(aut.rc, 0) << aut.out;
  EXPECT_NE(aut.out.find("Paris"), std::string::npos) << aut.out;
  if (gpu::pick_gpu(gpus, /*allow_cpu=*/false) < 0) {
    EXPECT_NE(aut.out.find("running on the CPU"), std::string::npos) << aut.out;
  }
  Result listed = basalt_cmd("info --gpus");
  ASSERT_EQ(listed.rc, 0) << listed.out;
  if (!gpus.empty()) {
    EXPECT_NE(listed.out.find(gpus[0].name), std::string::npos) << listed.out;
  }
#endif
  Result none_listed = basalt_cmd("info --gpus", "", "VK_ICD_FILENAMES=/nonexistent");
  ASSERT_EQ(none_listed.rc, 0) << none_listed.out;
  EXPECT_NE(none_listed.out.find(none_listed_says), std::string::npos) << none_listed.out;
}

}  // namespace
}  // namespace basalt
