// SPDX-License-Identifier: MIT
// GGUF (versions 2 and 3): metadata, tensor infos, and the mmapped data.
// Every size, count and offset is validated at open; a lying file is an Error.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/util/mapped_file.h"

namespace basalt {

enum class GgufType : uint32_t {
  uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5,
  float32 = 6, boolean = 7, string = 8, array = 9, uint64 = 10, int64 = 11, float64 = 12,
};
const char* gguf_type_name(GgufType t);

// One metadata value. Arrays hold one element type; arrays of arrays are
// accepted by the reader and kept as nested values.
struct GgufValue {
  GgufType type = GgufType::uint8;
  GgufType array_type = GgufType::uint8;  // element type when type == array
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<GgufValue>> data;

  bool is_integer() const;
  bool is_number() const;
  int64_t as_int() const;      // integers of any width and bool; Error otherwise or on overflow
  double as_float() const;     // any number
  bool as_bool() const;
  const std::string& as_string() const;
  const std::vector<GgufValue>& as_array() const;
};

// ggml's tensor types by their GGUF id; only some are loadable (quant/).
enum class GgmlType : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15,
  iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22, iq4_xs = 23,
  i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30,
  tq1_0 = 34, tq2_0 = 35,
};
std::string ggml_type_name(GgmlType t);
// Elements per block and bytes per block; {0, 0} for ids this build does not know.
struct GgmlTypeSize { uint32_t block_elems, block_bytes; };
GgmlTypeSize ggml_type_size(GgmlType t);

struct GgufTensorInfo {
  std::string name;
  GgmlType type;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the contiguous (innermost) one
  uint64_t offset = 0;        // from the start of the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping

  int64_t n_elements() const;
};

class GgufFile {
 public:
  // Past these a file is refused before its parts are read (docs/LIMITS.md):
  // a metadata value takes 48 bytes in memory however few it takes in the
  // file, so a crafted array could otherwise ask for 48x the file's size.
  // Real models have ~300 to ~3000 tensors and under a million values
  // (a 262k-token vocabulary's tokens, scores and types).
  static constexpr uint64_t kMaxTensors = 1 << 16;
  static constexpr uint64_t kMaxMetadataValues = 1 << 23;  // keys, array elements and nested arrays together

  static GgufFile open(const std::string& path);                   // mmaps the file
  static GgufFile from_memory(std::vector<uint8_t> bytes, std::string name = "<memory>");

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }

  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  const GgufValue& get(std::string_view key) const;  // Error naming the key if absent
  // Typed getters: Error if present with the wrong type; fallback if absent.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;  // empty if absent
  std::vector<float> get_float_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // Frees the metadata once a model is made from it (a 262k-token vocabulary
  // is ~50 MB of values) and drops the header's pages; the tensors stay.
  void drop_metadata();
  // Drops a converted tensor's pages from resident memory (MappedFile::release).
  void release(const GgufTensorInfo& t) const { file_->release(t.data, t.n_bytes); }
  void release(const uint8_t* p, size_t n) const { file_->release(p, n); }

 private:
  void parse();

  std::string path_;
  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_start_ = 0;  // where the tensor data begins (the header before it)
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace basalt
