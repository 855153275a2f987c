// SPDX-License-Identifier: MIT
// A Vulkan device: what it is and can do (GpuInfo, read once), the logical
// device with one compute queue, its memory types, and the pipelines made on
// it (cached by shader and constants; gpu/pipeline.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/vulkan_api.h"

namespace basalt::gpu {

enum class GpuKind { discrete, integrated, virtual_gpu, cpu, other };
const char* gpu_kind_name(GpuKind kind);

struct GpuInfo {
  int index = 0;  // in the driver's order, as --gpu-device counts
  std::string name, driver;
  GpuKind kind = GpuKind::other;
  uint32_t api_version = 0, vendor_id = 0;
  uint32_t subgroup_size = 0;
  bool subgroup_arithmetic = false;  // subgroupAdd and friends in compute shaders
  bool float16 = false;              // shaderFloat16
  bool storage16 = false;            // storageBuffer16BitAccess
  bool storage8 = false;             // storageBuffer8BitAccess + shaderInt8
  bool integer_dot = false;          // VK_KHR_shader_integer_dot_product (dot products of 4 packed int8)
  uint64_t device_local_bytes = 0;   // the largest device-local heap
  uint64_t max_alloc_bytes = 0;      // maxMemoryAllocationSize
  uint64_t max_storage_range = 0;    // maxStorageBufferRange: the most one binding can span
  uint32_t max_shared_bytes = 0;     // maxComputeSharedMemorySize
  bool unified_memory = false;       // device-local memory the host can map (integrated, CPU)

  bool software() const { return kind == GpuKind::cpu; }
  bool usable() const;  // Vulkan 1.2: what the shaders need (the rest has portable variants)
  std::string describe() const;  // "llvmpipe (LLVM 15.0.6, 256 bits): cpu, Vulkan 1.3, subgroup 8, 23.5 GiB"
};

// The devices present; empty, with *why_not set, when there is no loader, no
// instance or no device.
std::vector<GpuInfo> list_gpus(std::string* why_not = nullptr);

// The best device: discrete, then integrated, virtual, other; a CPU
// implementation (lavapipe) only when allow_cpu. -1 if none fits.
int pick_gpu(const std::vector<GpuInfo>& gpus, bool allow_cpu);

class Pipeline;
struct PipelineSpec;

class Device {
 public:
  static std::unique_ptr<Device> open(int index);  // throws GpuError
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const GpuInfo& info() const { return info_; }
  VkDevice handle() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  // A memory type allowed by type_bits with all of `want`, preferring one
  // without `avoid`; UINT32_MAX if none.
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid = 0) const;
  VkMemoryPropertyFlags memory_flags(uint32_t type) const { return memory_.memoryTypes[type].propertyFlags; }
  // The pipeline for spec, made on first use.
  const Pipeline& pipeline(const PipelineSpec& spec);

  // Shaders with a variant by device feature (subgroup operations, integer
  // dot products, f16 arithmetic) take it where the device has the feature
  // and it is allowed: all are (but f16 arithmetic on a CPU implementation,
  // which emulates it), unless BASALT_GPU_PORTABLE (a driver's bug) says
  // otherwise: 1 keeps to the portable shaders, a list such as
  // "integer_dot,float16" turns those features off and allows the rest. The
  // tests switch them to run each.
  struct Allowed {
    bool subgroups = true, integer_dot = true, float16 = true, storage16 = true;
  };
  static Allowed parse_allowed(std::string_view portable);  // GpuError if malformed
  Allowed allowed() const { return allowed_; }
  void set_allowed(Allowed a) { allowed_ = a; }
  bool subgroups() const { return info_.subgroup_arithmetic && allowed_.subgroups; }
  bool integer_dot() const { return info_.integer_dot && allowed_.integer_dot; }
  bool float16_arith() const { return info_.float16 && allowed_.float16; }
  bool storage16() const { return info_.storage16 && allowed_.storage16; }  // 16-bit values in buffers
  // The variants in use, for the plan line: "subgroup, integer dot, fp16" ("f16 as words"
  // without 16-bit storage), or "portable".
  std::string variants() const;
  // "name_subgroup" where the device takes that variant, else name.
  std::string variant(const std::string& name) const { return subgroups() ? name + "_subgroup" : name; }

 private:
  Device() = default;
  GpuInfo info_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  Allowed allowed_;
  VkPhysicalDeviceMemoryProperties memory_{};
  std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
};

}  // namespace basalt::gpu
