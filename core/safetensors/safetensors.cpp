// SPDX-License-Identifier: MIT
// Validation follows the format's reference implementation: the header is a
// JSON object with no duplicate names, every tensor's byte size matches its
// dtype and shape, and the data offsets tile the byte buffer exactly (no
// overlap, no hole, nothing after).
#include "core/safetensors/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace basalt {

namespace {

using nlohmann::json;

struct DtypeInfo {
  const char* name;
  StDtype dtype;
  size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {"BOOL", StDtype::boolean, 1}, {"U8", StDtype::u8, 1},   {"I8", StDtype::i8, 1},          {"I16", StDtype::i16, 2},
    {"U16", StDtype::u16, 2},      {"F16", StDtype::f16, 2}, {"BF16", StDtype::bf16, 2},      {"I32", StDtype::i32, 4},
    {"U32", StDtype::u32, 4},      {"F32", StDtype::f32, 4}, {"I64", StDtype::i64, 8},        {"U64", StDtype::u64, 8},
    {"F64", StDtype::f64, 8},      {"F8_E4M3", StDtype::f8_e4m3, 1}, {"F8_E5M2", StDtype::f8_e5m2, 1},
};

const DtypeInfo& info(StDtype t) {
  for (const DtypeInfo& d : kDtypes)
    if (d.dtype == t) return d;
  throw Error("internal: unknown safetensors dtype");
}

// A JSON number that is a non-negative integer, or Error.
uint64_t unsigned_int(const json& v, const std::string& what) {
  if (!v.is_number_unsigned()) throw Error(what + " must be a non-negative integer, got " + v.dump());
  return v.get<uint64_t>();
}

}  // namespace

const char* st_dtype_name(StDtype t) { return info(t).name; }
size_t st_dtype_size(StDtype t) { return info(t).size; }

int64_t StTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = std::make_unique<std::string>(path);
  f.file_ = std::make_unique<MappedFile>(MappedFile::map(path));
  f.parse();
  return f;
}

SafetensorsFile SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  SafetensorsFile f;
  f.path_ = std::make_unique<std::string>(name);
  f.file_ = std::make_unique<MappedFile>(MappedFile::from_bytes(std::move(bytes)));
  f.parse();
  return f;
}

void SafetensorsFile::parse() {
  const std::string& p = *path_;
  const uint8_t* base = file_->data();
  const size_t size = file_->size();
  if (size < 8) throw Error(p + ": " + std::to_string(size) + " bytes, too short for a safetensors file (8-byte header length)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | base[i];
  if (n > kMaxHeaderBytes)
    throw Error(p + ": header length " + std::to_string(n) + " is over the limit of " + std::to_string(kMaxHeaderBytes) +
                " bytes (not a safetensors file?)");
  if (n > size - 8)
    throw Error(p + ": header length " + std::to_string(n) + " is past the end of the file (" + std::to_string(size) + " bytes)");
  const char* header = reinterpret_cast<const char*>(base + 8);
  if (n < 2 || header[0] != '{') throw Error(p + ": the header is not a JSON object");

  // Duplicate tensor names would make "the" tensor ambiguous: the parser keeps
  // only the last, so they are caught while parsing.
  std::set<std::string> seen;
  std::string duplicate;
  json root;
  try {
    root = json::parse(header, header + n, [&](int depth, json::parse_event_t ev, json& parsed) {
      if (ev == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second && duplicate.empty())
        duplicate = parsed.get<std::string>();
      return true;
    });
  } catch (const json::exception& e) {
    throw Error(p + ": the header is not valid JSON (" + e.what() + ")");
  }
  if (!root.is_object()) throw Error(p + ": the header is not a JSON object");
  if (!duplicate.empty()) throw Error(p + ": tensor " + duplicate + " appears twice in the header");

  const uint8_t* buffer = base + 8 + n;
  const uint64_t buffer_bytes = size - 8 - n;
  struct Range {
    uint64_t begin, end;
    size_t tensor;
  };
  std::vector<Range> ranges;
  for (const auto& [name, v] : root.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) throw Error(p + ": __metadata__ must be an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) throw Error(p + ": __metadata__ entry " + k + " is not a string");
        metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    const std::string what = p + ": tensor " + name;
    if (name.empty()) throw Error(p + ": a tensor has an empty name");
    if (!v.is_object()) throw Error(what + ": entry is not an object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!v.contains(key)) throw Error(what + ": no " + key);
    const json& dt = v["dtype"];
    if (!dt.is_string()) throw Error(what + ": dtype is not a string");
    const DtypeInfo* d = nullptr;
    for (const DtypeInfo& c : kDtypes)
      if (dt.get<std::string>() == c.name) d = &c;
    if (!d) throw Error(what + ": unknown dtype " + dt.dump());
    const json& shape = v["shape"];
    if (!shape.is_array()) throw Error(what + ": shape is not an array");
    if (shape.size() > 8) throw Error(what + ": " + std::to_string(shape.size()) + " dimensions (at most 8)");
    StTensor t{name, d->dtype, {}, nullptr, 0, path_.get(), file_.get()};
    uint64_t count = 1;
    for (const json& dim : shape) {
      const uint64_t x = unsigned_int(dim, what + ": a dimension");
      if (x > (uint64_t{1} << 40) || (x != 0 && count > (uint64_t{1} << 50) / x))
        throw Error(what + ": shape " + shape.dump() + " is absurdly large");
      count *= x;
      t.shape.push_back(static_cast<int64_t>(x));
    }
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2) throw Error(what + ": data_offsets must be [begin, end]");
    const uint64_t b = unsigned_int(off[0], what + ": data_offsets"), e = unsigned_int(off[1], what + ": data_offsets");
    if (b > e) throw Error(what + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + "] end before they begin");
    if (e > buffer_bytes)
      throw Error(what + ": data_offsets end at " + std::to_string(e) + ", past the " + std::to_string(buffer_bytes) +
                  " bytes of tensor data");
    if (e - b != count * d->size)
      throw Error(what + ": " + std::to_string(e - b) + " bytes of data for " + d->name + " " + shape.dump() + " (expected " +
                  std::to_string(count * d->size) + ")");
    t.data = buffer + b;
    t.n_bytes = static_cast<size_t>(e - b);
    ranges.push_back({b, e, tensors_.size()});
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  // The tensors must tile the buffer: sorted by offset, each starts where the last ended.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t at = 0;
  for (const Range& r : ranges) {
    const std::string& name = tensors_[r.tensor].name;
    if (r.begin < at) throw Error(p + ": tensor " + name + " overlaps the tensor before it (offset " + std::to_string(r.begin) + ")");
    if (r.begin > at) throw Error(p + ": " + std::to_string(r.begin - at) + " bytes before tensor " + name + " belong to no tensor");
    at = r.end;
  }
  if (at != buffer_bytes)
    throw Error(p + ": " + std::to_string(buffer_bytes - at) + " bytes after the last tensor belong to no tensor");
}

const StTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

SafetensorsSet SafetensorsSet::open_folder(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsSet s;
  const fs::path folder(dir), single = folder / "model.safetensors", index = folder / "model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  if (fs::exists(index)) {
    const std::string ip = index.string();
    json j;
    try {
      const MappedFile f = MappedFile::map(ip);
      j = json::parse(f.data(), f.data() + f.size());
    } catch (const json::exception& e) {
      throw Error(ip + ": not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw Error(ip + ": no weight_map object");
    std::vector<std::string> shards;
    std::set<std::string> seen;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) throw Error(ip + ": weight_map entry " + name + " is not a file name");
      const std::string f = file.get<std::string>();
      // A shard is a file beside the index, never a path elsewhere.
      if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." || f == "..")
        throw Error(ip + ": weight_map entry " + name + " names " + file.dump() + ", not a file in the folder");
      weight_map[name] = f;
      if (seen.insert(f).second) shards.push_back(f);  // in the index's order, each once
      if (shards.size() > kMaxShards)
        throw Error(ip + ": more than " + std::to_string(kMaxShards) + " shards, the most basalt opens");
    }
    if (shards.empty()) throw Error(ip + ": weight_map is empty");
    for (const std::string& f : shards) {
      const fs::path shard = folder / f;
      if (!fs::exists(shard)) throw Error(ip + ": shard " + f + " is missing from " + dir);
      s.files_.push_back(SafetensorsFile::open(shard.string()));
    }
  } else if (fs::exists(single)) {
    s.files_.push_back(SafetensorsFile::open(single.string()));
  } else {
    throw Error(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  for (const SafetensorsFile& f : s.files_)
    for (const StTensor& t : f.tensors())
      if (!s.index_.emplace(t.name, &t).second) throw Error(dir + ": tensor " + t.name + " is in two shards");
  for (const auto& [name, file] : weight_map) {
    const StTensor* t = s.find(name);
    if (!t) throw Error(dir + ": tensor " + name + " is in the index but in no shard (" + file + ")");
    if (fs::path(*t->file).filename() != file)
      throw Error(dir + ": tensor " + name + " is in " + fs::path(*t->file).filename().string() + ", the index says " + file);
  }
  return s;
}

const StTensor* SafetensorsSet::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::vector<const StTensor*> SafetensorsSet::tensors() const {
  std::vector<const StTensor*> out;
  for (const auto& [name, t] : index_) out.push_back(t);
  return out;
}

}  // namespace basalt
