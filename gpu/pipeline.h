// SPDX-License-Identifier: MIT
// A compute pipeline: an embedded shader (gpu/shaders.h), its storage
// buffers at bindings 0..n-1, a push-constant block and specialization
// constants 0..k-1. Device::pipeline() makes each once and keeps it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/vulkan_api.h"

namespace basalt::gpu {

class Device;

struct PipelineSpec {
  std::string shader;               // name in the embedded table
  uint32_t n_buffers = 0;           // storage buffers, bindings 0..n_buffers-1
  uint32_t push_bytes = 0;          // push constants (a multiple of 4, at most 128)
  std::vector<uint32_t> constants;  // specialization constants by id (ints, or floats' bits)
  std::string key() const;
};

class Pipeline {
 public:
  Pipeline(Device& device, const PipelineSpec& spec);  // throws GpuError
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  const PipelineSpec& spec() const { return spec_; }
  VkPipeline handle() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }

 private:
  void release();
  Device& device_;
  PipelineSpec spec_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace basalt::gpu
