// SPDX-License-Identifier: MIT
// GGUF reader. Every read goes through Cursor, which checks bounds; every
// count is checked against the bytes left before anything is allocated.
#include "core/gguf/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/util/utf8.h"

namespace basalt {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;

class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, std::string name) : p_(data), size_(size), name_(std::move(name)) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }
  const uint8_t* data() const { return p_; }

  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // n more metadata values (kMaxMetadataValues in all), counted before they are allocated.
  void count_values(uint64_t n, const std::string& key) {
    if (n > GgufFile::kMaxMetadataValues - values_)
      fail("key " + key + ": more than " + std::to_string(GgufFile::kMaxMetadataValues) + " metadata values in the file");
    values_ += n;
  }

  std::string read_string(const char* what) {
    uint64_t len = read<uint64_t>(what);
    if (len > left())
      fail(std::string(what) + ": string length " + std::to_string(len) + " is past the end of the file");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }

  void need(uint64_t n, const char* what) const {
    if (n > left()) fail(std::string("truncated file: ") + what + " needs " + std::to_string(n) + " bytes at offset " +
                         std::to_string(pos_) + ", only " + std::to_string(left()) + " left");
  }

  [[noreturn]] void fail(const std::string& msg) const { throw Error(name_ + ": " + msg); }

 private:
  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  uint64_t values_ = 0;
  std::string name_;
};

// Smallest encoded size of one value of type t (for checking counts early).
uint64_t min_encoded_size(GgufType t) {
  switch (t) {
    case GgufType::uint8: case GgufType::int8: case GgufType::boolean: return 1;
    case GgufType::uint16: case GgufType::int16: return 2;
    case GgufType::uint32: case GgufType::int32: case GgufType::float32: return 4;
    case GgufType::uint64: case GgufType::int64: case GgufType::float64: return 8;
    case GgufType::string: return 8;
    case GgufType::array: return 12;
  }
  return 1;
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::float64); }

GgufValue read_value(Cursor& c, GgufType type, int depth, const std::string& key) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufType::uint8: v.data = uint64_t{c.read<uint8_t>(key.c_str())}; break;
    case GgufType::int8: v.data = int64_t{c.read<int8_t>(key.c_str())}; break;
    case GgufType::uint16: v.data = uint64_t{c.read<uint16_t>(key.c_str())}; break;
    case GgufType::int16: v.data = int64_t{c.read<int16_t>(key.c_str())}; break;
    case GgufType::uint32: v.data = uint64_t{c.read<uint32_t>(key.c_str())}; break;
    case GgufType::int32: v.data = int64_t{c.read<int32_t>(key.c_str())}; break;
    case GgufType::uint64: v.data = c.read<uint64_t>(key.c_str()); break;
    case GgufType::int64: v.data = c.read<int64_t>(key.c_str()); break;
    case GgufType::float32: v.data = double{c.read<float>(key.c_str())}; break;
    case GgufType::float64: v.data = c.read<double>(key.c_str()); break;
    case GgufType::boolean: {
      uint8_t b = c.read<uint8_t>(key.c_str());
      if (b > 1) c.fail("key " + key + ": boolean value " + std::to_string(b) + " is neither 0 nor 1");
      v.data = b == 1;
      break;
    }
    case GgufType::string: v.data = c.read_string(key.c_str()); break;
    case GgufType::array: {
      if (depth >= kMaxArrayDepth) c.fail("key " + key + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth));
      uint32_t et = c.read<uint32_t>(key.c_str());
      if (!valid_type(et)) c.fail("key " + key + ": unknown array element type " + std::to_string(et));
      v.array_type = static_cast<GgufType>(et);
      uint64_t n = c.read<uint64_t>(key.c_str());
      if (n > c.left() / min_encoded_size(v.array_type))
        c.fail("key " + key + ": array of " + std::to_string(n) + " elements does not fit in the " +
               std::to_string(c.left()) + " bytes left");
      c.count_values(n, key);
      std::vector<GgufValue> items;
      items.reserve(n);
      for (uint64_t i = 0; i < n; ++i) items.push_back(read_value(c, v.array_type, depth + 1, key));
      v.data = std::move(items);
      break;
    }
  }
  return v;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                "bool", "string", "array", "uint64", "int64", "float64"};
  auto i = static_cast<uint32_t>(t);
  return i < std::size(names) ? names[i] : "unknown";
}

bool GgufValue::is_integer() const {
  return std::holds_alternative<uint64_t>(data) || std::holds_alternative<int64_t>(data);
}
bool GgufValue::is_number() const { return is_integer() || std::holds_alternative<double>(data); }

int64_t GgufValue::as_int() const {
  if (auto* u = std::get_if<uint64_t>(&data)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) throw Error("integer value too large");
    return static_cast<int64_t>(*u);
  }
  if (auto* i = std::get_if<int64_t>(&data)) return *i;
  if (auto* b = std::get_if<bool>(&data)) return *b;
  throw Error(std::string("expected an integer, found ") + gguf_type_name(type));
}
double GgufValue::as_float() const {
  if (auto* d = std::get_if<double>(&data)) return *d;
  if (is_integer()) return static_cast<double>(as_int());
  throw Error(std::string("expected a number, found ") + gguf_type_name(type));
}
bool GgufValue::as_bool() const {
  if (auto* b = std::get_if<bool>(&data)) return *b;
  if (is_integer()) return as_int() != 0;
  throw Error(std::string("expected a bool, found ") + gguf_type_name(type));
}
const std::string& GgufValue::as_string() const {
  if (auto* s = std::get_if<std::string>(&data)) return *s;
  throw Error(std::string("expected a string, found ") + gguf_type_name(type));
}
const std::vector<GgufValue>& GgufValue::as_array() const {
  if (auto* a = std::get_if<std::vector<GgufValue>>(&data)) return *a;
  throw Error(std::string("expected an array, found ") + gguf_type_name(type));
}

GgmlTypeSize ggml_type_size(GgmlType t) {
  switch (t) {
    case GgmlType::f32: return {1, 4};
    case GgmlType::f16: return {1, 2};
    case GgmlType::bf16: return {1, 2};
    case GgmlType::q4_0: return {32, 18};
    case GgmlType::q4_1: return {32, 20};
    case GgmlType::q5_0: return {32, 22};
    case GgmlType::q5_1: return {32, 24};
    case GgmlType::q8_0: return {32, 34};
    case GgmlType::q8_1: return {32, 36};
    case GgmlType::q2_k: return {256, 84};
    case GgmlType::q3_k: return {256, 110};
    case GgmlType::q4_k: return {256, 144};
    case GgmlType::q5_k: return {256, 176};
    case GgmlType::q6_k: return {256, 210};
    case GgmlType::q8_k: return {256, 292};
    case GgmlType::iq4_nl: return {32, 18};
    case GgmlType::iq4_xs: return {256, 136};
    case GgmlType::i8: return {1, 1};
    case GgmlType::i16: return {1, 2};
    case GgmlType::i32: return {1, 4};
    case GgmlType::i64: return {1, 8};
    case GgmlType::f64: return {1, 8};
    default: return {0, 0};
  }
}

std::string ggml_type_name(GgmlType t) {
  switch (t) {
    case GgmlType::f32: return "F32";
    case GgmlType::f16: return "F16";
    case GgmlType::bf16: return "BF16";
    case GgmlType::q4_0: return "Q4_0";
    case GgmlType::q4_1: return "Q4_1";
    case GgmlType::q5_0: return "Q5_0";
    case GgmlType::q5_1: return "Q5_1";
    case GgmlType::q8_0: return "Q8_0";
    case GgmlType::q8_1: return "Q8_1";
    case GgmlType::q2_k: return "Q2_K";
    case GgmlType::q3_k: return "Q3_K";
    case GgmlType::q4_k: return "Q4_K";
    case GgmlType::q5_k: return "Q5_K";
    case GgmlType::q6_k: return "Q6_K";
    case GgmlType::q8_k: return "Q8_K";
    case GgmlType::iq2_xxs: return "IQ2_XXS";
    case GgmlType::iq2_xs: return "IQ2_XS";
    case GgmlType::iq3_xxs: return "IQ3_XXS";
    case GgmlType::iq1_s: return "IQ1_S";
    case GgmlType::iq4_nl: return "IQ4_NL";
    case GgmlType::iq3_s: return "IQ3_S";
    case GgmlType::iq2_s: return "IQ2_S";
    case GgmlType::iq4_xs: return "IQ4_XS";
    case GgmlType::i8: return "I8";
    case GgmlType::i16: return "I16";
    case GgmlType::i32: return "I32";
    case GgmlType::i64: return "I64";
    case GgmlType::f64: return "F64";
    case GgmlType::iq1_m: return "IQ1_M";
    case GgmlType::tq1_0: return "TQ1_0";
    case GgmlType::tq2_0: return "TQ2_0";
  }
  return "type " + std::to_string(static_cast<uint32_t>(t));
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.path_ = path;
  f.file_ = std::make_shared<MappedFile>(MappedFile::map(path));
  f.parse();
  return f;
}

GgufFile GgufFile::from_memory(std::vector<uint8_t> bytes, std::string name) {
  GgufFile f;
  f.path_ = std::move(name);
  f.file_ = std::make_shared<MappedFile>(MappedFile::from_bytes(std::move(bytes)));
  f.parse();
  return f;
}

void GgufFile::parse() {
  Cursor c(file_->data(), file_->size(), path_);
  if (file_->size() < 4 || c.read<uint32_t>("magic") != kMagic) c.fail("not a GGUF file (bad magic)");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    c.fail("unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)");
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a
  // tensor info at least 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.left() / 13) c.fail("metadata count " + std::to_string(n_kv) + " is larger than the file can hold");
  if (n_tensors > c.left() / 32) c.fail("tensor count " + std::to_string(n_tensors) + " is larger than the file can hold");
  if (n_tensors > kMaxTensors)
    c.fail("tensor count " + std::to_string(n_tensors) + " is more than the " + std::to_string(kMaxTensors) + " basalt reads");
  if (n_kv > kMaxMetadataValues)
    c.fail("metadata count " + std::to_string(n_kv) + " is more than the " + std::to_string(kMaxMetadataValues) + " basalt reads");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key");
    if (key.empty()) c.fail("metadata key " + std::to_string(i) + " is empty");
    if (!is_valid_utf8(key)) c.fail("metadata key " + std::to_string(i) + " is not valid UTF-8");
    uint32_t t = c.read<uint32_t>(key.c_str());
    if (!valid_type(t)) c.fail("key " + key + ": unknown value type " + std::to_string(t));
    c.count_values(1, key);
    GgufValue v = read_value(c, static_cast<GgufType>(t), 0, key);
    if (!kv_.emplace(key, std::move(v)).second) c.fail("duplicate metadata key " + key);
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (!a->is_integer()) c.fail("general.alignment is not an integer");
    int64_t al = a->as_int();
    if (al <= 0 || (al & (al - 1)) != 0 || al > (1 << 20))
      c.fail("general.alignment " + std::to_string(al) + " is not a power of two");
    alignment_ = static_cast<uint64_t>(al);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = c.read_string("tensor name");
    if (t.name.empty() || !is_valid_utf8(t.name)) c.fail("tensor " + std::to_string(i) + " has an empty or non-UTF-8 name");
    uint32_t n_dims = c.read<uint32_t>(t.name.c_str());
    if (n_dims == 0 || n_dims > kMaxDims)
      c.fail("tensor " + t.name + ": " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    uint64_t n_elem = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = c.read<uint64_t>(t.name.c_str());
      if (dim == 0 || dim > (uint64_t{1} << 40))
        c.fail("tensor " + t.name + ": dimension " + std::to_string(d) + " is " + std::to_string(dim));
      if (n_elem > std::numeric_limits<int64_t>::max() / dim) c.fail("tensor " + t.name + ": element count overflows");
      n_elem *= dim;
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    uint32_t type = c.read<uint32_t>(t.name.c_str());
    t.type = static_cast<GgmlType>(type);
    GgmlTypeSize ts = ggml_type_size(t.type);
    if (ts.block_elems == 0) c.fail("tensor " + t.name + ": unknown tensor type " + std::to_string(type));
    if (t.dims[0] % ts.block_elems != 0)
      c.fail("tensor " + t.name + ": row of " + std::to_string(t.dims[0]) + " elements is not a multiple of the " +
             ggml_type_name(t.type) + " block size " + std::to_string(ts.block_elems));
    t.n_bytes = n_elem / ts.block_elems * ts.block_bytes;
    t.offset = c.read<uint64_t>(t.name.c_str());
    if (t.offset % alignment_ != 0)
      c.fail("tensor " + t.name + ": offset " + std::to_string(t.offset) + " is not aligned to " + std::to_string(alignment_));
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) c.fail("duplicate tensor name " + t.name);
    tensors_.push_back(std::move(t));
  }

  const uint64_t data_start = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  data_start_ = data_start;
  if (n_tensors > 0 && data_start > file_->size())
    c.fail("truncated file: the tensor data section would start at " + std::to_string(data_start) + ", past the end (" +
           std::to_string(file_->size()) + ")");
  uint64_t data_size = file_->size() - std::min<uint64_t>(data_start, file_->size());

  // Every tensor inside the data section, none overlapping another.
  std::vector<const GgufTensorInfo*> by_offset;
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      c.fail("tensor " + t.name + ": offset " + std::to_string(t.offset) + " + " + std::to_string(t.n_bytes) +
             " bytes is past the end of the data section (" + std::to_string(data_size) + " bytes)");
    t.data = file_->data() + data_start + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    if (prev->offset + prev->n_bytes > by_offset[i]->offset)
      c.fail("tensors " + prev->name + " and " + by_offset[i]->name + " overlap");
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::get(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) throw Error(path_ + ": metadata key " + std::string(key) + " is missing");
  return *v;
}

namespace {
template <class F>
auto typed(const GgufFile& f, std::string_view key, F&& convert) -> std::optional<decltype(convert(f.get(key)))> {
  const GgufValue* v = f.find(key);
  if (!v) return std::nullopt;
  try {
    return convert(*v);
  } catch (const Error& e) {
    throw Error(f.path() + ": metadata key " + std::string(key) + ": " + e.what());
  }
}
}  // namespace

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  return typed(*this, key, [](const GgufValue& v) {
    if (!v.is_integer()) throw Error(std::string("expected an integer, found ") + gguf_type_name(v.type));
    return v.as_int();
  });
}
std::optional<double> GgufFile::get_float(std::string_view key) const {
  return typed(*this, key, [](const GgufValue& v) { return v.as_float(); });
}
std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  return typed(*this, key, [](const GgufValue& v) { return v.as_bool(); });
}
std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  return typed(*this, key, [](const GgufValue& v) { return v.as_string(); });
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  return typed(*this, key, [](const GgufValue& v) {
           std::vector<std::string> out;
           for (auto& e : v.as_array()) out.push_back(e.as_string());
           return out;
         }).value_or(std::vector<std::string>{});
}
std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  return typed(*this, key, [](const GgufValue& v) {
           std::vector<float> out;
           for (auto& e : v.as_array()) out.push_back(static_cast<float>(e.as_float()));
           return out;
         }).value_or(std::vector<float>{});
}
std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  return typed(*this, key, [](const GgufValue& v) {
           std::vector<int64_t> out;
           for (auto& e : v.as_array()) out.push_back(e.as_int());
           return out;
         }).value_or(std::vector<int64_t>{});
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void GgufFile::drop_metadata() {
  std::map<std::string, GgufValue>().swap(kv_);
  file_->release(file_->data(), static_cast<size_t>(std::min<uint64_t>(data_start_, file_->size())));
}

}  // namespace basalt
