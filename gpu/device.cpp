// SPDX-License-Identifier: MIT
#include "gpu/device.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "gpu/pipeline.h"

namespace basalt::gpu {

namespace {

// One instance for the process, made on first use and kept.
VkInstance instance(std::string* why_not) {
  static std::once_flag once;
  static VkInstance inst = VK_NULL_HANDLE;
  static std::string error;
  std::call_once(once, [] {
    if (!load_vulkan(&error)) return;
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "basalt";
    app.pEngineName = "basalt";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    const VkResult r = vk().vkCreateInstance(&ci, nullptr, &inst);
    if (r != VK_SUCCESS) {
      error = r == VK_ERROR_INCOMPATIBLE_DRIVER ? "no Vulkan device (no driver installed)"
                                                : std::string("no Vulkan device (vkCreateInstance: ") + vk_result_name(r) + ")";
      inst = VK_NULL_HANDLE;
      return;
    }
    load_instance_functions(inst);
  });
  if (why_not) *why_not = error;
  return inst;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance inst) {
  uint32_t n = 0;
  vk_check(vk().vkEnumeratePhysicalDevices(inst, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devs(n);
  vk_check(vk().vkEnumeratePhysicalDevices(inst, &n, devs.data()), "vkEnumeratePhysicalDevices");
  devs.resize(n);
  return devs;
}

GpuKind kind_of(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return GpuKind::discrete;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return GpuKind::integrated;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return GpuKind::virtual_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return GpuKind::cpu;
    default: return GpuKind::other;
  }
}

constexpr const char* kIntegerDotExtension = "VK_KHR_shader_integer_dot_product";

bool has_extension(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  if (vk().vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> ext(n);
  if (vk().vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data()) != VK_SUCCESS) return false;
  for (const VkExtensionProperties& e : ext)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// The 1.1 and 1.2 feature structs, chained, and the integer dot product's where the extension is there.
struct Features {
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dot{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
  explicit Features(bool with_dot) {
    f2.pNext = &f11;
    f11.pNext = &f12;
    if (with_dot) f12.pNext = &dot;
  }
};

GpuInfo read_info(VkPhysicalDevice pd, int index) {
  GpuInfo g;
  g.index = index;
  VkPhysicalDeviceProperties p;
  vk().vkGetPhysicalDeviceProperties(pd, &p);
  g.name = p.deviceName;
  g.kind = kind_of(p.deviceType);
  g.api_version = p.apiVersion;
  g.vendor_id = p.vendorID;
  g.max_storage_range = p.limits.maxStorageBufferRange;
  g.max_shared_bytes = p.limits.maxComputeSharedMemorySize;
  VkPhysicalDeviceMemoryProperties mem;
  vk().vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      g.device_local_bytes = std::max<uint64_t>(g.device_local_bytes, mem.memoryHeaps[h].size);
  // Device-local memory the host maps; on a discrete GPU that is at most a BAR window, not its memory.
  for (uint32_t t = 0; t < mem.memoryTypeCount; ++t) {
    const VkMemoryPropertyFlags f = mem.memoryTypes[t].propertyFlags;
    if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
      g.unified_memory = g.kind != GpuKind::discrete;
  }
  if (VK_API_VERSION_MINOR(g.api_version) < 2 && VK_API_VERSION_MAJOR(g.api_version) == 1) return g;

  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  p2.pNext = &sub;
  sub.pNext = &m3;
  m3.pNext = &drv;
  vk().vkGetPhysicalDeviceProperties2(pd, &p2);
  g.subgroup_size = sub.subgroupSize;
  g.subgroup_arithmetic = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                          (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  g.max_alloc_bytes = m3.maxMemoryAllocationSize;
  g.driver = std::string(drv.driverName) + (drv.driverInfo[0] ? std::string(" ") + drv.driverInfo : "");

  const bool dot_extension = has_extension(pd, kIntegerDotExtension);
  Features f(dot_extension);
  vk().vkGetPhysicalDeviceFeatures2(pd, &f.f2);
  g.storage16 = f.f11.storageBuffer16BitAccess;
  g.float16 = f.f12.shaderFloat16;
  g.storage8 = f.f12.storageBuffer8BitAccess && f.f12.shaderInt8;
  g.integer_dot = dot_extension && f.dot.shaderIntegerDotProduct;
  return g;
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

}  // namespace

std::string Device::variants() const {
  std::string v;
  for (auto [on, name] : {std::pair{subgroups(), "subgroup"}, {integer_dot(), "integer dot"}, {float16_arith(), "fp16"},
                          {!storage16(), "f16 as words"}})
    if (on) v += std::string(v.empty() ? "" : ", ") + name;
  return v.empty() ? "portable" : v;
}

Device::Allowed Device::parse_allowed(std::string_view portable) {
  if (portable.empty() || portable == "0") return {};
  if (portable == "1") return {false, false, false, false};
  Allowed a;
  while (!portable.empty()) {
    const size_t comma = portable.find(',');
    const std::string_view f = portable.substr(0, comma);
    if (f == "subgroups") a.subgroups = false;
    else if (f == "integer_dot") a.integer_dot = false;
    else if (f == "float16") a.float16 = false;
    else if (f == "storage16") a.storage16 = false;
    else throw GpuError("BASALT_GPU_PORTABLE: '" + std::string(f) +
                        "' is not 1, 0 or a feature (subgroups, integer_dot, float16, storage16)");
    portable = comma == std::string_view::npos ? std::string_view() : portable.substr(comma + 1);
  }
  return a;
}

const char* gpu_kind_name(GpuKind kind) {
  switch (kind) {
    case GpuKind::discrete: return "discrete";
    case GpuKind::integrated: return "integrated";
    case GpuKind::virtual_gpu: return "virtual";
    case GpuKind::cpu: return "cpu";
    case GpuKind::other: return "other";
  }
  return "other";
}

bool GpuInfo::usable() const { return VK_API_VERSION_MAJOR(api_version) > 1 || VK_API_VERSION_MINOR(api_version) >= 2; }

std::string GpuInfo::describe() const {
  std::string s = name + ": " + gpu_kind_name(kind) + ", Vulkan " + std::to_string(VK_API_VERSION_MAJOR(api_version)) +
                  "." + std::to_string(VK_API_VERSION_MINOR(api_version));
  if (subgroup_size) s += ", subgroup " + std::to_string(subgroup_size);
  if (float16) s += ", fp16";
  if (storage8) s += ", int8";
  if (integer_dot) s += ", int8 dot";
  s += ", " + gib(device_local_bytes);
  if (unified_memory) s += " shared with the host";
  if (!usable()) s += " (unusable: needs Vulkan 1.2)";
  return s;
}

std::vector<GpuInfo> list_gpus(std::string* why_not) {
  std::string why;
  const VkInstance inst = instance(&why);
  std::vector<GpuInfo> out;
  if (inst) {
    try {
      const std::vector<VkPhysicalDevice> devs = physical_devices(inst);
      for (size_t i = 0; i < devs.size(); ++i) out.push_back(read_info(devs[i], static_cast<int>(i)));
      if (out.empty()) why = "no Vulkan device";
    } catch (const GpuError& e) {
      why = e.what();
    }
  }
  if (why_not) *why_not = why;
  return out;
}

int pick_gpu(const std::vector<GpuInfo>& gpus, bool allow_cpu) {
  const GpuKind order[] = {GpuKind::discrete, GpuKind::integrated, GpuKind::virtual_gpu, GpuKind::other, GpuKind::cpu};
  for (GpuKind k : order) {
    if (k == GpuKind::cpu && !allow_cpu) break;
    for (const GpuInfo& g : gpus)
      if (g.kind == k && g.usable()) return g.index;
  }
  return -1;
}

std::unique_ptr<Device> Device::open(int index) {
  std::string why;
  const VkInstance inst = instance(&why);
  if (!inst) throw GpuError(why);
  const std::vector<VkPhysicalDevice> devs = physical_devices(inst);
  if (index < 0 || index >= static_cast<int>(devs.size()))
    throw GpuError("no Vulkan device " + std::to_string(index) + " (there are " + std::to_string(devs.size()) + ")");
  std::unique_ptr<Device> d(new Device);
  d->physical_ = devs[static_cast<size_t>(index)];
  d->info_ = read_info(d->physical_, index);
  if (!d->info_.usable()) throw GpuError("Vulkan device " + d->info_.describe());
  // A quirk of CPU implementations: they emulate f16 arithmetic (slower than
  // f32 on lavapipe: docs/PERFORMANCE.md), so it is off unless asked for.
  if (d->info_.software()) d->allowed_.float16 = false;
  // A list turns off what it names and allows the rest (f16 arithmetic too: asked for); "0" changes nothing.
  const char* portable = std::getenv("BASALT_GPU_PORTABLE");
  if (portable && *portable && std::string_view(portable) != "0") d->allowed_ = parse_allowed(portable);
  vk().vkGetPhysicalDeviceMemoryProperties(d->physical_, &d->memory_);

  uint32_t nq = 0;
  vk().vkGetPhysicalDeviceQueueFamilyProperties(d->physical_, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vk().vkGetPhysicalDeviceQueueFamilyProperties(d->physical_, &nq, qf.data());
  // A compute queue, preferring one without graphics (a dedicated compute engine).
  int family = -1;
  for (uint32_t i = 0; i < nq; ++i) {
    if (!(qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (family < 0 || !(qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) family = static_cast<int>(i);
  }
  if (family < 0) throw GpuError(d->info_.name + " has no compute queue");
  d->queue_family_ = static_cast<uint32_t>(family);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = d->queue_family_;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  // Enable what the shaders may use, where present.
  Features want(d->info_.integer_dot);
  want.f11.storageBuffer16BitAccess = d->info_.storage16;
  want.f12.shaderFloat16 = d->info_.float16;
  want.f12.shaderInt8 = d->info_.storage8;
  want.f12.storageBuffer8BitAccess = d->info_.storage8;
  want.dot.shaderIntegerDotProduct = d->info_.integer_dot;
  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.pNext = &want.f2;
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &qi;
  if (d->info_.integer_dot) {
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = &kIntegerDotExtension;
  }
  vk_check(vk().vkCreateDevice(d->physical_, &ci, nullptr, &d->device_), "vkCreateDevice (" + d->info_.name + ")");
  vk().vkGetDeviceQueue(d->device_, d->queue_family_, 0, &d->queue_);
  return d;
}

Device::~Device() {
  if (!device_) return;
  vk().vkDeviceWaitIdle(device_);
  pipelines_.clear();
  vk().vkDestroyDevice(device_, nullptr);
}

uint32_t Device::memory_type(uint32_t type_bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid) const {
  uint32_t fallback = UINT32_MAX;
  for (uint32_t t = 0; t < memory_.memoryTypeCount; ++t) {
    if (!(type_bits & (1u << t)) || (memory_.memoryTypes[t].propertyFlags & want) != want) continue;
    if (!(memory_.memoryTypes[t].propertyFlags & avoid)) return t;
    if (fallback == UINT32_MAX) fallback = t;
  }
  return fallback;
}

const Pipeline& Device::pipeline(const PipelineSpec& spec) {
  const std::string key = spec.key();
  auto it = pipelines_.find(key);
  if (it == pipelines_.end()) it = pipelines_.emplace(key, std::make_unique<Pipeline>(*this, spec)).first;
  return *it->second;
}

}  // namespace basalt::gpu
