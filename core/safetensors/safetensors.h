// SPDX-License-Identifier: MIT
// safetensors files (the HF checkpoint format) and sharded sets of them.
// A file is an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}), then the tensor bytes. Everything is
// validated at open: a file that opens can be read without further checks.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/util/mapped_file.h"

namespace basalt {

enum class StDtype { boolean, u8, i8, i16, u16, f16, bf16, i32, u32, f32, i64, u64, f64, f8_e4m3, f8_e5m2 };

const char* st_dtype_name(StDtype t);  // as in the header: "F16", "BF16", "I32"...
size_t st_dtype_size(StDtype t);

struct StTensor {
  std::string name;
  StDtype dtype;
  std::vector<int64_t> shape;  // outermost first, as in PyTorch
  const uint8_t* data;         // inside the mapped file
  size_t n_bytes;
  const std::string* file;     // the path, for messages
  const MappedFile* mapping;   // the file's bytes (release: a converted tensor's pages)

  int64_t n_elements() const;
};

class SafetensorsFile {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100 << 20;

  static SafetensorsFile open(const std::string& path);  // Error naming the path and what is wrong
  static SafetensorsFile from_bytes(std::vector<uint8_t> bytes, const std::string& name = "<memory>");

  const std::string& path() const { return *path_; }
  const std::vector<StTensor>& tensors() const { return tensors_; }
  const StTensor* find(const std::string& name) const;  // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void parse();

  std::unique_ptr<std::string> path_;  // stable address: tensors point at it
  std::unique_ptr<MappedFile> file_;  // stable address: tensors point at it
  std::vector<StTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// The tensors of a model folder: model.safetensors, or the shards that
// model.safetensors.index.json names (its weight_map: tensor -> file).
class SafetensorsSet {
 public:
  static constexpr size_t kMaxShards = 4096;  // each one a mapping; the largest checkpoints have a few hundred

  static SafetensorsSet open_folder(const std::string& dir);  // Error if neither exists or they disagree

  const StTensor* find(const std::string& name) const;  // nullptr if absent
  std::vector<const StTensor*> tensors() const;          // every tensor of every shard
  size_t n_files() const { return files_.size(); }

 private:
  std::vector<SafetensorsFile> files_;
  std::map<std::string, const StTensor*> index_;
};

}  // namespace basalt
