// SPDX-License-Identifier: MIT
#include "core/model/gptq_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/util/json_text.h"

namespace basalt {

namespace {

using nlohmann::json;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error(p.string() + ": cannot read");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

template <typename T>
T get(const json& q, const char* key, T fallback, const std::string& where) {
  if (!q.contains(key) || q[key].is_null()) return fallback;
  const json& v = q[key];
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw Error(where + ": " + key + " must be true or false, got " + v.dump());
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) throw Error(where + ": " + key + " must be an integer, got " + v.dump());
  } else {
    if (!v.is_string()) throw Error(where + ": " + key + " must be a string, got " + v.dump());
  }
  return v.get<T>();
}

GptqConfig parse(const json& q, const std::string& where) {
  if (!q.is_object()) throw Error(where + ": the quantization config is not a JSON object");
  const std::string method = get<std::string>(q, "quant_method", "gptq", where);
  if (method != "gptq")
    throw Error(where + ": quant_method \"" + method + "\" is not supported (basalt reads GPTQ checkpoints)");
  if (get<bool>(q, "is_marlin_format", false, where))
    throw Error(where + ": Marlin-repacked GPTQ checkpoints are not supported (use the plain GPTQ format)");
  const std::string format = get<std::string>(q, "checkpoint_format", get<std::string>(q, "format", "gptq", where), where);
  if (format != "gptq" && format != "gptq_v2")
    throw Error(where + ": checkpoint_format \"" + format + "\" is not supported (gptq or gptq_v2)");
  GptqConfig c;
  c.source = where;
  c.params.bits = static_cast<int>(get<int64_t>(q, "bits", 4, where));
  if (c.params.bits != 4 && c.params.bits != 8)
    throw Error(where + ": bits " + std::to_string(c.params.bits) + " is not supported (4 or 8)");
  c.params.group_size = get<int64_t>(q, "group_size", 128, where);
  if (c.params.group_size != -1 && (c.params.group_size <= 0 || c.params.group_size % 32))
    throw Error(where + ": group_size " + std::to_string(c.params.group_size) + " is not supported (a multiple of 32, or -1)");
  c.params.v2 = format == "gptq_v2";
  c.desc_act = get<bool>(q, "desc_act", false, where);
  c.sym = get<bool>(q, "sym", true, where);
  return c;
}

}  // namespace

std::optional<GptqConfig> gptq_config_from_text(const std::string& text, const std::string& where, bool nested) {
  const json j = parse_json_object(text, where);
  if (!nested) return parse(j, where);
  if (!j.contains("quantization_config") || j["quantization_config"].is_null()) return std::nullopt;
  return parse(j["quantization_config"], where + " (quantization_config)");
}

std::optional<GptqConfig> read_gptq_config(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path folder(dir);
  if (auto c = gptq_config_from_text(read_text(folder / "config.json"), (folder / "config.json").string(), true)) return c;
  for (const char* name : {"quantize_config.json", "quant_config.json"})
    if (fs::exists(folder / name)) return gptq_config_from_text(read_text(folder / name), (folder / name).string(), false);
  return std::nullopt;
}

}  // namespace basalt
