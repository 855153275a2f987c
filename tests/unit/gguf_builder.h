// SPDX-License-Identifier: MIT
// Writes GGUF bytes for tests, including deliberately broken ones.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace basalt::test {

// An F32 tensor's bytes, for GgufBuilder::tensor.
inline std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

class GgufBuilder {
 public:
  std::vector<uint8_t> kv_bytes, tensor_bytes, data;
  uint64_t n_kv = 0, n_tensors = 0;
  uint32_t version = 3;
  uint32_t magic = 0x46554747;
  uint64_t alignment = 32;

  template <class T>
  static void put(std::vector<uint8_t>& b, T v) {
    // resize + memcpy: gcc 12 warns falsely (stringop-overflow) about insert of a value's bytes
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
  }
  static void put_str(std::vector<uint8_t>& b, const std::string& s) {
    put<uint64_t>(b, s.size());
    b.insert(b.end(), s.begin(), s.end());
  }

  GgufBuilder& kv_u32(const std::string& k, uint32_t v) { return key(k, 4), put(kv_bytes, v), *this; }
  GgufBuilder& kv_f32(const std::string& k, float v) { return key(k, 6), put(kv_bytes, v), *this; }
  GgufBuilder& kv_bool(const std::string& k, bool v) { return key(k, 7), put<uint8_t>(kv_bytes, v), *this; }
  GgufBuilder& kv_str(const std::string& k, const std::string& v) { return key(k, 8), put_str(kv_bytes, v), *this; }
  GgufBuilder& kv_strs(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9);
    put<uint32_t>(kv_bytes, 8);
    put<uint64_t>(kv_bytes, v.size());
    for (auto& s : v) put_str(kv_bytes, s);
    return *this;
  }
  GgufBuilder& kv_f32s(const std::string& k, const std::vector<float>& v) {
    key(k, 9);
    put<uint32_t>(kv_bytes, 6);
    put<uint64_t>(kv_bytes, v.size());
    for (float f : v) put(kv_bytes, f);
    return *this;
  }
  // Tensor with its bytes appended to the data section (aligned).
  GgufBuilder& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, const std::vector<uint8_t>& bytes) {
    while (data.size() % alignment) data.push_back(0);
    return tensor_at(name, dims, type, data.size()), data.insert(data.end(), bytes.begin(), bytes.end()), *this;
  }
  GgufBuilder& tensor_at(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    ++n_tensors;
    put_str(tensor_bytes, name);
    put<uint32_t>(tensor_bytes, static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) put(tensor_bytes, d);
    put(tensor_bytes, type);
    put(tensor_bytes, offset);
    return *this;
  }

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> b;
    put(b, magic);
    put(b, version);
    put(b, n_tensors);
    put(b, n_kv);
    b.insert(b.end(), kv_bytes.begin(), kv_bytes.end());
    b.insert(b.end(), tensor_bytes.begin(), tensor_bytes.end());
    while (b.size() % alignment) b.push_back(0);
    b.insert(b.end(), data.begin(), data.end());
    return b;
  }

 private:
  void key(const std::string& k, uint32_t type) {
    ++n_kv;
    put_str(kv_bytes, k);
    put(kv_bytes, type);
  }
};

}  // namespace basalt::test
