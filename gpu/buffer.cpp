// SPDX-License-Identifier: MIT
#include "gpu/buffer.h"

#include "gpu/device.h"

namespace basalt::gpu {

namespace {
std::string mib(size_t bytes) { return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB"; }
}  // namespace

Buffer::Buffer(Device& device, size_t bytes, Memory where, const std::string& what) : device_(device), size_(bytes) {
  const GpuInfo& info = device.info();
  if (bytes == 0) throw GpuError("empty buffer for " + what);
  if (info.max_alloc_bytes && bytes > info.max_alloc_bytes)
    throw GpuError(what + ": " + mib(bytes) + " is more than one allocation may be on " + info.name + " (" +
                   mib(info.max_alloc_bytes) + ")", VK_ERROR_OUT_OF_DEVICE_MEMORY);
  const VkDevice dev = device.handle();
  try {
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = bytes;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    vk_check(vk().vkCreateBuffer(dev, &bi, nullptr, &buffer_), "vkCreateBuffer (" + what + ")");
    VkMemoryRequirements req;
    vk().vkGetBufferMemoryRequirements(dev, buffer_, &req);
    uint32_t type = UINT32_MAX;
    if (where == Memory::device) {
      // Unified memory: a device-local type the host maps, so uploads are copies in place.
      if (info.unified_memory)
        type = device.memory_type(req.memoryTypeBits,
                                  VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
      if (type == UINT32_MAX) type = device.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    } else {
      // Staging: cached host memory reads back fast; coherent spares the flushes.
      type = device.memory_type(req.memoryTypeBits,
                                VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                                    VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
      if (type == UINT32_MAX) type = device.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
    }
    if (type == UINT32_MAX) throw GpuError(what + ": no suitable memory type on " + info.name);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    vk_check(vk().vkAllocateMemory(dev, &ai, nullptr, &memory_), "vkAllocateMemory (" + what + ", " + mib(bytes) + ")");
    vk_check(vk().vkBindBufferMemory(dev, buffer_, memory_, 0), "vkBindBufferMemory (" + what + ")");
    const VkMemoryPropertyFlags flags = device.memory_flags(type);
    if (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
      void* p = nullptr;
      vk_check(vk().vkMapMemory(dev, memory_, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory (" + what + ")");
      mapped_ = static_cast<uint8_t*>(p);
      coherent_ = flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    }
  } catch (...) {
    release();
    throw;
  }
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  const VkDevice dev = device_.handle();
  if (buffer_) vk().vkDestroyBuffer(dev, buffer_, nullptr);
  if (memory_) vk().vkFreeMemory(dev, memory_, nullptr);  // unmaps
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

void Buffer::flush() const {
  if (coherent_ || !mapped_) return;
  VkMappedMemoryRange r{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, memory_, 0, VK_WHOLE_SIZE};
  vk_check(vk().vkFlushMappedMemoryRanges(device_.handle(), 1, &r), "vkFlushMappedMemoryRanges");
}

void Buffer::invalidate() const {
  if (coherent_ || !mapped_) return;
  VkMappedMemoryRange r{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, memory_, 0, VK_WHOLE_SIZE};
  vk_check(vk().vkInvalidateMappedMemoryRanges(device_.handle(), 1, &r), "vkInvalidateMappedMemoryRanges");
}

}  // namespace basalt::gpu
