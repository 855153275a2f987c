// SPDX-License-Identifier: MIT
#include "gpu/pipeline.h"

#include "gpu/device.h"
#include "gpu/shaders.h"

namespace basalt::gpu {

std::string PipelineSpec::key() const {
  std::string k = shader;
  for (uint32_t c : constants) k.append("/").append(std::to_string(c));  // (gcc 12 warns falsely on "/" + ...)
  return k;
}

Pipeline::Pipeline(Device& device, const PipelineSpec& spec) : device_(device), spec_(spec) {
  const ShaderCode* code = find_shader(spec.shader);
  if (!code) throw GpuError("no shader named " + spec.shader + " in this build");
  const VkDevice dev = device.handle();
  try {
    std::vector<VkDescriptorSetLayoutBinding> bindings(spec.n_buffers);
    for (uint32_t i = 0; i < spec.n_buffers; ++i)
      bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    dl.bindingCount = spec.n_buffers;
    dl.pBindings = bindings.data();
    vk_check(vk().vkCreateDescriptorSetLayout(dev, &dl, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");

    VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, spec.push_bytes};
    VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &set_layout_;
    pl.pushConstantRangeCount = spec.push_bytes ? 1 : 0;
    pl.pPushConstantRanges = &push;
    vk_check(vk().vkCreatePipelineLayout(dev, &pl, nullptr, &layout_), "vkCreatePipelineLayout");

    VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    sm.codeSize = code->n_words * 4;
    sm.pCode = code->words;
    VkShaderModule module;
    vk_check(vk().vkCreateShaderModule(dev, &sm, nullptr, &module), "vkCreateShaderModule (" + spec.shader + ")");

    std::vector<VkSpecializationMapEntry> entries(spec.constants.size());
    for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, 4 * i, 4};
    VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), spec.constants.size() * 4,
                            spec.constants.data()};
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = entries.empty() ? nullptr : &si;
    ci.layout = layout_;
    const VkResult r = vk().vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, nullptr, &pipeline_);
    vk().vkDestroyShaderModule(dev, module, nullptr);
    vk_check(r, "vkCreateComputePipelines (" + spec.key() + ")");
  } catch (...) {
    release();
    throw;
  }
}

Pipeline::~Pipeline() { release(); }

void Pipeline::release() {
  const VkDevice dev = device_.handle();
  if (pipeline_) vk().vkDestroyPipeline(dev, pipeline_, nullptr);
  if (layout_) vk().vkDestroyPipelineLayout(dev, layout_, nullptr);
  if (set_layout_) vk().vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
  pipeline_ = VK_NULL_HANDLE;
  layout_ = VK_NULL_HANDLE;
  set_layout_ = VK_NULL_HANDLE;
}

}  // namespace basalt::gpu
