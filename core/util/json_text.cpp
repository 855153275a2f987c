// SPDX-License-Identifier: MIT
#include "core/util/json_text.h"

#include "core/error.h"
#include "core/util/mapped_file.h"

namespace basalt {

nlohmann::json parse_json_object(const char* begin, const char* end, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(begin, end);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(where + ": not a JSON object");
  return j;
}

nlohmann::json read_json_object(const std::string& path) {
  const MappedFile f = MappedFile::map(path);
  const char* p = reinterpret_cast<const char*>(f.data());
  return parse_json_object(p, p + f.size(), path);
}

}  // namespace basalt
