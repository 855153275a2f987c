// SPDX-License-Identifier: MIT
// A storage buffer and its memory: device-local for weights, activations and
// the KV cache (mapped too where the memory is the host's: integrated GPUs,
// lavapipe), or host memory for staging transfers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/vulkan_api.h"

namespace basalt::gpu {

class Device;

enum class Memory { device, host };

class Buffer {
 public:
  // what names it in errors ("weights of blk.3.ffn_up.weight"). Throws GpuError:
  // out_of_memory() when the device's memory is exhausted; larger than one
  // allocation or binding may be (GpuInfo::max_alloc_bytes, max_storage_range).
  Buffer(Device& device, size_t bytes, Memory where, const std::string& what);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  size_t size() const { return size_; }
  uint8_t* mapped() const { return mapped_; }  // nullptr: not host visible
  // For memory that is not host coherent: after host writes, before host reads.
  void flush() const;
  void invalidate() const;

 private:
  void release();
  Device& device_;
  size_t size_ = 0;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint8_t* mapped_ = nullptr;
  bool coherent_ = true;
};

}  // namespace basalt::gpu
