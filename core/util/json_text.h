// SPDX-License-Identifier: MIT
// JSON documents that must be objects (config files): parsed with nlohmann,
// every failure an Error naming where the text came from.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace basalt {

nlohmann::json parse_json_object(const char* begin, const char* end, const std::string& where);
inline nlohmann::json parse_json_object(const std::string& text, const std::string& where) {
  return parse_json_object(text.data(), text.data() + text.size(), where);
}
// The file at path, mapped and parsed.
nlohmann::json read_json_object(const std::string& path);

}  // namespace basalt
