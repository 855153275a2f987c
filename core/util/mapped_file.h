// SPDX-License-Identifier: MIT
// A read-only file in memory: mmapped from disk, or owned bytes (tests, fuzzing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace basalt {

class MappedFile {
 public:
  static MappedFile map(const std::string& path);  // Error if it cannot be opened or mapped
  static MappedFile from_bytes(std::vector<uint8_t> bytes);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Drops the resident pages of [p, p + n) from this process (a tensor
  // converted to an engine format is not read again): the process's memory
  // then holds the converted copy only. The bytes stay readable (a later read
  // faults them in again from the page cache). No-op for owned bytes.
  void release(const uint8_t* p, size_t n) const;

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::vector<uint8_t> owned_;
};

}  // namespace basalt
