// SPDX-License-Identifier: MIT
#include "core/safetensors/safetensors_writer.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace basalt {

void write_safetensors(const std::string& path, const std::vector<StTensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  std::vector<uint64_t> sizes;
  for (const StTensorOut& t : tensors) {
    if (!names.insert(t.name).second) throw Error(path + ": tensor " + t.name + " written twice");
    uint64_t n = st_dtype_size(t.dtype);
    for (int64_t d : t.shape) {
      if (d < 0) throw Error(path + ": tensor " + t.name + " has a negative dimension");
      n *= static_cast<uint64_t>(d);
    }
    header[t.name] = {{"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    sizes.push_back(n);
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::string partial = path + ".partial";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(partial.c_str(), "wb"), &std::fclose);
  if (!f) throw Error("cannot write " + partial);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, f.get()) == 8 && std::fwrite(text.data(), 1, text.size(), f.get()) == text.size();
  for (size_t i = 0; ok && i < tensors.size(); ++i)
    ok = sizes[i] == 0 || std::fwrite(tensors[i].data, 1, sizes[i], f.get()) == sizes[i];
  ok = std::fflush(f.get()) == 0 && ok;
  ok = std::fclose(f.release()) == 0 && ok;
  std::error_code ec;
  if (ok) std::filesystem::rename(partial, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(partial, ec);
    throw Error("writing " + path + " failed (disk full?)");
  }
}

}  // namespace basalt
