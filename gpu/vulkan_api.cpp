// SPDX-License-Identifier: MIT
#include "gpu/vulkan_api.h"

#include <dlfcn.h>

#include <mutex>

namespace basalt::gpu {

const char* vk_result_name(VkResult r) {
  switch (r) {
#define BASALT_VK_RESULT(name) \
  case name: return #name;
    BASALT_VK_RESULT(VK_SUCCESS)
    BASALT_VK_RESULT(VK_NOT_READY)
    BASALT_VK_RESULT(VK_TIMEOUT)
    BASALT_VK_RESULT(VK_INCOMPLETE)
    BASALT_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    BASALT_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    BASALT_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    BASALT_VK_RESULT(VK_ERROR_DEVICE_LOST)
    BASALT_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    BASALT_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    BASALT_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    BASALT_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    BASALT_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    BASALT_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    BASALT_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    BASALT_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    BASALT_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    BASALT_VK_RESULT(VK_ERROR_UNKNOWN)
#undef BASALT_VK_RESULT
    default: return "VK_ERROR (unnamed)";
  }
}

void vk_check(VkResult r, const std::string& what) {
  if (r != VK_SUCCESS) throw GpuError(what + ": " + vk_result_name(r), r);
}

VulkanApi& vk() {
  static VulkanApi api;
  return api;
}

bool load_vulkan(std::string* why_not) {
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = "no Vulkan loader (libvulkan.so.1)";
      return;
    }
    VulkanApi& api = vk();
    api.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
    if (!api.vkGetInstanceProcAddr) {
      error = "the Vulkan loader has no vkGetInstanceProcAddr";
      return;
    }
#define BASALT_VK_LOAD(name) api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(nullptr, #name));
    BASALT_VK_GLOBAL(BASALT_VK_LOAD)
#undef BASALT_VK_LOAD
    if (!api.vkCreateInstance) error = "the Vulkan loader has no vkCreateInstance";
  });
  if (why_not) *why_not = error;
  return error.empty();
}

// Device functions are loaded through the instance too: the loader's
// trampolines then serve every device of that instance.
void load_instance_functions(VkInstance instance) {
  VulkanApi& api = vk();
#define BASALT_VK_LOAD(name) api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(instance, #name));
  BASALT_VK_INSTANCE(BASALT_VK_LOAD)
  BASALT_VK_DEVICE(BASALT_VK_LOAD)
#undef BASALT_VK_LOAD
}

}  // namespace basalt::gpu
