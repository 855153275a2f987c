// SPDX-License-Identifier: MIT
// The Vulkan functions basalt calls, loaded at run time from the system's
// loader (libvulkan.so.1) rather than linked: a machine without Vulkan still
// runs basalt, on the CPU, and says why in one line.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <stdexcept>
#include <string>

namespace basalt::gpu {

// A Vulkan failure with what was being done ("vkAllocateMemory (weights, 512 MiB): VK_ERROR_OUT_OF_DEVICE_MEMORY").
class GpuError : public std::runtime_error {
 public:
  GpuError(const std::string& what, VkResult result = VK_SUCCESS) : std::runtime_error(what), result(result) {}
  VkResult result;
  bool out_of_memory() const {
    return result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY;
  }
};

const char* vk_result_name(VkResult r);
// Throws GpuError("what: VK_ERROR_...") unless r is VK_SUCCESS.
void vk_check(VkResult r, const std::string& what);

// X-macros: the functions of each level, loaded by name.
#define BASALT_VK_GLOBAL(X) \
  X(vkCreateInstance)       \
  X(vkEnumerateInstanceVersion)

#define BASALT_VK_INSTANCE(X)                 \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)

#define BASALT_VK_DEVICE(X)          \
  X(vkDestroyDevice)                 \
  X(vkGetDeviceQueue)                \
  X(vkDeviceWaitIdle)                \
  X(vkCreateBuffer)                  \
  X(vkDestroyBuffer)                 \
  X(vkGetBufferMemoryRequirements)   \
  X(vkAllocateMemory)                \
  X(vkFreeMemory)                    \
  X(vkBindBufferMemory)              \
  X(vkMapMemory)                     \
  X(vkUnmapMemory)                   \
  X(vkFlushMappedMemoryRanges)       \
  X(vkInvalidateMappedMemoryRanges)  \
  X(vkCreateShaderModule)            \
  X(vkDestroyShaderModule)           \
  X(vkCreateDescriptorSetLayout)     \
  X(vkDestroyDescriptorSetLayout)    \
  X(vkCreatePipelineLayout)          \
  X(vkDestroyPipelineLayout)         \
  X(vkCreateComputePipelines)        \
  X(vkDestroyPipeline)               \
  X(vkCreateDescriptorPool)          \
  X(vkDestroyDescriptorPool)         \
  X(vkResetDescriptorPool)           \
  X(vkAllocateDescriptorSets)        \
  X(vkUpdateDescriptorSets)          \
  X(vkCreateCommandPool)             \
  X(vkDestroyCommandPool)            \
  X(vkAllocateCommandBuffers)        \
  X(vkBeginCommandBuffer)            \
  X(vkEndCommandBuffer)              \
  X(vkResetCommandBuffer)            \
  X(vkCmdBindPipeline)               \
  X(vkCmdBindDescriptorSets)         \
  X(vkCmdPushConstants)              \
  X(vkCmdDispatch)                   \
  X(vkCmdPipelineBarrier)            \
  X(vkCmdCopyBuffer)                 \
  X(vkCmdFillBuffer)                 \
  X(vkQueueSubmit)                   \
  X(vkCreateFence)                   \
  X(vkDestroyFence)                  \
  X(vkWaitForFences)                 \
  X(vkResetFences)

struct VulkanApi {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define BASALT_VK_MEMBER(name) PFN_##name name = nullptr;
  BASALT_VK_GLOBAL(BASALT_VK_MEMBER)
  BASALT_VK_INSTANCE(BASALT_VK_MEMBER)
  BASALT_VK_DEVICE(BASALT_VK_MEMBER)
#undef BASALT_VK_MEMBER
};

// The process's table. load_vulkan() fills the global functions once (false,
// with the reason, when there is no loader); load_instance_functions the rest
// (device functions too, as the loader's trampolines) for the one instance.
VulkanApi& vk();
bool load_vulkan(std::string* why_not);
void load_instance_functions(VkInstance instance);

}  // namespace basalt::gpu
