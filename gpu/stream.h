// SPDX-License-Identifier: MIT
// A command stream: records dispatches and transfers into one command
// buffer, inserting a barrier wherever an operation reads or writes a buffer
// that an earlier one of the batch wrote (or writes one it read), then
// submits and waits in finish(). Uploads and downloads go through the
// stream's own staging memory, so they are ordered with the dispatches.
//
//   Stream s(dev);
//   s.upload(x, host_x, bytes);
//   s.dispatch(pipe, {in(w), in(x), out(y)}, &push, sizeof push, groups);
//   s.download(y, host_y, bytes);
//   s.finish();  // host_y holds the result
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <unordered_set>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/vulkan_api.h"

namespace basalt::gpu {

class Device;
class Pipeline;

// A buffer bound to a dispatch (bindings in order), with how the shader uses it.
struct Arg {
  const Buffer* buffer;
  bool reads, writes;
};
inline Arg in(const Buffer& b) { return {&b, true, false}; }
inline Arg out(const Buffer& b) { return {&b, false, true}; }
inline Arg inout(const Buffer& b) { return {&b, true, true}; }

struct Groups {
  uint32_t x = 1, y = 1, z = 1;
};

class Stream {
 public:
  explicit Stream(Device& device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void dispatch(const Pipeline& pipeline, std::initializer_list<Arg> args, const void* push, size_t push_bytes,
                Groups groups);
  void upload(const Buffer& dst, const void* src, size_t bytes, size_t dst_offset = 0);
  void download(const Buffer& src, void* dst, size_t bytes, size_t src_offset = 0);  // dst filled by finish()
  void fill_zero(const Buffer& dst, size_t offset, size_t bytes);
  // Device-to-device copies of byte ranges; within one buffer, no range may
  // read bytes that another (or itself) writes.
  struct Range {
    size_t src_offset, dst_offset, bytes;
  };
  void copy(const Buffer& src, const Buffer& dst, const std::vector<Range>& ranges);
  // Submits what was recorded and waits; throws GpuError (a lost device, a timeout).
  void finish() {
    submit();
    wait();
  }
  // The two halves: submit() returns at once (the host may work meanwhile),
  // wait() waits for the submission, then fills the downloads' destinations
  // and frees the staging memory. Record nothing between them.
  void submit();
  // Submissions by every stream of the process: how often the host waits
  // on a device (tests check that a decode step is one).
  static uint64_t submissions();
  void wait();
  bool empty() const { return !recording_; }

 private:
  struct Staging {
    std::unique_ptr<Buffer> buffer;
    size_t used = 0;
  };
  struct Readback {
    const Buffer* staging;
    size_t offset, bytes;
    void* dst;
  };
  VkCommandBuffer begin();
  // Host-visible room for bytes: its buffer and offset.
  std::pair<const Buffer*, size_t> stage(size_t bytes);
  // A barrier first if any of these accesses conflicts with the batch's earlier ones.
  void order(std::initializer_list<Arg> args);
  VkDescriptorSet descriptor_set(const Pipeline& pipeline);

  Device& device_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> descriptor_pools_;
  size_t descriptor_pool_in_use_ = 0;
  bool recording_ = false, submitted_ = false;
  std::vector<Staging> staging_;
  std::vector<Readback> readbacks_;
  std::unordered_set<VkBuffer> written_, read_;  // since the last barrier
};

// Copies host memory to device buffers at load time, in chunks through two
// streams' staging memory in turn, so the host fills one chunk (reading the
// model file) while the device copies the previous one; mapped buffers are
// written in place. The destinations must stay alive and unused until finish().
class Uploader {
 public:
  // chunk_bytes: one stream's staging memory; always_stage: through staging
  // into mapped buffers too (tests of the staged path on unified memory).
  explicit Uploader(Device& device, size_t chunk_bytes = size_t{16} << 20, bool always_stage = false);
  ~Uploader();  // waits for what is in flight
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  void write(const Buffer& dst, const void* src, size_t bytes, size_t offset = 0);
  void finish();  // every copy done; throws GpuError

 private:
  std::unique_ptr<Stream> streams_[2];
  int next_ = 0;
  size_t chunk_bytes_;
  bool always_stage_;
};

}  // namespace basalt::gpu
