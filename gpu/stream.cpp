// SPDX-License-Identifier: MIT
#include "gpu/stream.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "gpu/device.h"
#include "gpu/pipeline.h"

namespace basalt::gpu {

namespace {
constexpr uint32_t kSetsPerPool = 256;
constexpr size_t kMinStagingBytes = 4u << 20;
constexpr uint64_t kTimeoutNs = 120'000'000'000ull;  // a hung device, not a slow one (lavapipe is slow)
}  // namespace

Stream::Stream(Device& device) : device_(device) {
  const VkDevice dev = device.handle();
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = device.queue_family();
  vk_check(vk().vkCreateCommandPool(dev, &pi, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  vk_check(vk().vkAllocateCommandBuffers(dev, &ai, &cmd_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  vk_check(vk().vkCreateFence(dev, &fi, nullptr, &fence_), "vkCreateFence");
}

Stream::~Stream() {
  const VkDevice dev = device_.handle();
  if (recording_ || submitted_) vk().vkDeviceWaitIdle(dev);  // let anything in flight end first
  for (VkDescriptorPool p : descriptor_pools_) vk().vkDestroyDescriptorPool(dev, p, nullptr);
  if (fence_) vk().vkDestroyFence(dev, fence_, nullptr);
  if (pool_) vk().vkDestroyCommandPool(dev, pool_, nullptr);
}

VkCommandBuffer Stream::begin() {
  if (submitted_) throw GpuError("a stream recorded between submit() and wait()");
  if (!recording_) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vk_check(vk().vkBeginCommandBuffer(cmd_, &bi), "vkBeginCommandBuffer");
    recording_ = true;
  }
  return cmd_;
}

void Stream::order(std::initializer_list<Arg> args) {
  bool conflict = false;
  for (const Arg& a : args) {
    const VkBuffer b = a.buffer->handle();
    if (written_.count(b) || (a.writes && read_.count(b))) conflict = true;
  }
  if (conflict) {
    // One global barrier: every earlier shader or transfer write is visible to every later access.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vk().vkCmdPipelineBarrier(cmd_, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
    written_.clear();
    read_.clear();
  }
  for (const Arg& a : args) {
    if (a.writes) written_.insert(a.buffer->handle());
    if (a.reads) read_.insert(a.buffer->handle());
  }
}

VkDescriptorSet Stream::descriptor_set(const Pipeline& pipeline) {
  const VkDevice dev = device_.handle();
  const VkDescriptorSetLayout layout = pipeline.set_layout();
  for (;;) {
    if (descriptor_pool_in_use_ == descriptor_pools_.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * 8};
      VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      pi.maxSets = kSetsPerPool;
      pi.poolSizeCount = 1;
      pi.pPoolSizes = &size;
      VkDescriptorPool pool;
      vk_check(vk().vkCreateDescriptorPool(dev, &pi, nullptr, &pool), "vkCreateDescriptorPool");
      descriptor_pools_.push_back(pool);
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = descriptor_pools_[descriptor_pool_in_use_];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set;
    const VkResult r = vk().vkAllocateDescriptorSets(dev, &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) vk_check(r, "vkAllocateDescriptorSets");
    ++descriptor_pool_in_use_;  // full: the next pool
  }
}

void Stream::dispatch(const Pipeline& pipeline, std::initializer_list<Arg> args, const void* push, size_t push_bytes,
                      Groups groups) {
  const PipelineSpec& spec = pipeline.spec();
  if (args.size() != spec.n_buffers || push_bytes != spec.push_bytes)
    throw GpuError("dispatch of " + spec.shader + ": " + std::to_string(args.size()) + " buffers and " +
                   std::to_string(push_bytes) + " push bytes, the pipeline takes " + std::to_string(spec.n_buffers) +
                   " and " + std::to_string(spec.push_bytes));
  if (groups.x == 0 || groups.y == 0 || groups.z == 0) return;
  begin();
  order(args);
  const VkDescriptorSet set = descriptor_set(pipeline);
  std::vector<VkDescriptorBufferInfo> infos;
  infos.reserve(args.size());
  for (const Arg& a : args) infos.push_back({a.buffer->handle(), 0, VK_WHOLE_SIZE});
  std::vector<VkWriteDescriptorSet> writes(args.size(), {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET});
  for (uint32_t i = 0; i < writes.size(); ++i) {
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vk().vkUpdateDescriptorSets(device_.handle(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  vk().vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle());
  vk().vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0, 1, &set, 0, nullptr);
  if (push_bytes)
    vk().vkCmdPushConstants(cmd_, pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<uint32_t>(push_bytes),
                            push);
  vk().vkCmdDispatch(cmd_, groups.x, groups.y, groups.z);
}

std::pair<const Buffer*, size_t> Stream::stage(size_t bytes) {
  const size_t aligned = (bytes + 255) & ~size_t{255};
  for (Staging& s : staging_)
    if (s.buffer->size() - s.used >= aligned) {
      const size_t at = s.used;
      s.used += aligned;
      return {s.buffer.get(), at};
    }
  Staging s;
  s.buffer = std::make_unique<Buffer>(device_, std::max(kMinStagingBytes, aligned), Memory::host, "staging");
  s.used = aligned;
  staging_.push_back(std::move(s));
  return {staging_.back().buffer.get(), 0};
}

void Stream::upload(const Buffer& dst, const void* src, size_t bytes, size_t dst_offset) {
  if (bytes == 0) return;
  if (dst_offset + bytes > dst.size()) throw GpuError("upload past the end of a buffer");
  begin();
  auto [st, at] = stage(bytes);
  std::memcpy(st->mapped() + at, src, bytes);
  st->flush();
  order({in(*st), out(dst)});
  VkBufferCopy c{at, dst_offset, bytes};
  vk().vkCmdCopyBuffer(cmd_, st->handle(), dst.handle(), 1, &c);
}

void Stream::download(const Buffer& src, void* dst, size_t bytes, size_t src_offset) {
  if (bytes == 0) return;
  if (src_offset + bytes > src.size()) throw GpuError("download past the end of a buffer");
  begin();
  auto [st, at] = stage(bytes);
  order({in(src), out(*st)});
  VkBufferCopy c{src_offset, at, bytes};
  vk().vkCmdCopyBuffer(cmd_, src.handle(), st->handle(), 1, &c);
  readbacks_.push_back({st, at, bytes, dst});
}

void Stream::fill_zero(const Buffer& dst, size_t offset, size_t bytes) {
  if (bytes == 0) return;
  begin();
  order({out(dst)});
  vk().vkCmdFillBuffer(cmd_, dst.handle(), offset, bytes, 0);
}

void Stream::copy(const Buffer& src, const Buffer& dst, const std::vector<Range>& ranges) {
  if (ranges.empty()) return;
  auto overlap = [](size_t a, size_t b, size_t n, size_t m) { return a < b + m && b < a + n; };
  std::vector<VkBufferCopy> regions;
  regions.reserve(ranges.size());
  for (const Range& r : ranges) {
    if (r.src_offset + r.bytes > src.size() || r.dst_offset + r.bytes > dst.size()) throw GpuError("copy past the end of a buffer");
    if (&src == &dst)  // Vulkan: no region may read what any region writes
      for (const Range& w : ranges)
        if (overlap(r.src_offset, w.dst_offset, r.bytes, w.bytes)) throw GpuError("copy within one buffer onto its own source");
    regions.push_back({r.src_offset, r.dst_offset, r.bytes});
  }
  begin();
  if (&src == &dst) order({inout(src)});
  else order({in(src), out(dst)});
  vk().vkCmdCopyBuffer(cmd_, src.handle(), dst.handle(), static_cast<uint32_t>(regions.size()), regions.data());
}

namespace {
std::atomic<uint64_t> submission_count{0};
}  // namespace

uint64_t Stream::submissions() { return submission_count.load(std::memory_order_relaxed); }

void Stream::submit() {
  if (!recording_) return;
  submission_count.fetch_add(1, std::memory_order_relaxed);
  if (!readbacks_.empty()) {  // transfers done before the host reads
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vk().vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr,
                              0, nullptr);
  }
  recording_ = false;
  written_.clear();
  read_.clear();
  vk_check(vk().vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  vk_check(vk().vkQueueSubmit(device_.queue(), 1, &si, fence_), "vkQueueSubmit");
  submitted_ = true;
}

void Stream::wait() {
  if (!submitted_) return;
  const VkDevice dev = device_.handle();
  const VkResult r = vk().vkWaitForFences(dev, 1, &fence_, VK_TRUE, kTimeoutNs);
  if (r == VK_TIMEOUT) throw GpuError("the GPU did not finish within 120 s", VK_ERROR_DEVICE_LOST);
  vk_check(r, "vkWaitForFences");
  submitted_ = false;
  vk_check(vk().vkResetFences(dev, 1, &fence_), "vkResetFences");
  vk_check(vk().vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
  for (VkDescriptorPool p : descriptor_pools_) vk().vkResetDescriptorPool(dev, p, 0);
  descriptor_pool_in_use_ = 0;
  for (const Readback& rb : readbacks_) {
    rb.staging->invalidate();
    std::memcpy(rb.dst, rb.staging->mapped() + rb.offset, rb.bytes);
  }
  readbacks_.clear();
  // Keep the largest staging buffer for the next batch.
  size_t keep = 0;
  for (size_t i = 1; i < staging_.size(); ++i)
    if (staging_[i].buffer->size() > staging_[keep].buffer->size()) keep = i;
  if (!staging_.empty()) {
    Staging s = std::move(staging_[keep]);
    s.used = 0;
    staging_.clear();
    staging_.push_back(std::move(s));
  }
}

Uploader::Uploader(Device& device, size_t chunk_bytes, bool always_stage)
    : chunk_bytes_(std::max<size_t>(chunk_bytes, 1)), always_stage_(always_stage) {
  for (auto& s : streams_) s = std::make_unique<Stream>(device);
}

Uploader::~Uploader() {
  try {
    finish();
  } catch (const GpuError&) {  // a lost device: the streams' destructors wait for the rest
  }
}

void Uploader::write(const Buffer& dst, const void* src, size_t bytes, size_t offset) {
  if (offset + bytes > dst.size()) throw GpuError("write past the end of a buffer");
  if (dst.mapped() && !always_stage_) {
    std::memcpy(dst.mapped() + offset, src, bytes);
    dst.flush();
    return;
  }
  for (size_t at = 0; at < bytes; at += chunk_bytes_) {
    Stream& s = *streams_[next_];
    next_ ^= 1;
    s.wait();  // its previous chunk is copied: its staging memory is free
    s.upload(dst, static_cast<const uint8_t*>(src) + at, std::min(chunk_bytes_, bytes - at), offset + at);
    s.submit();
  }
}

void Uploader::finish() {
  for (auto& s : streams_) s->wait();
}

}  // namespace basalt::gpu
