// SPDX-License-Identifier: MIT
// Keys and values of every layer in a pool of blocks of kBlock positions,
// stored as f16, as int8 with one f32 scale per (position, KV head)
// (KvType::q8: half the memory and half the bytes a decode step reads;
// per-head absmax, so a key or value vector keeps its relative precision
// whatever its size; keys rotated first, kv_keys_rotated), or as 4-bit codes
// (KvType::q4: 30% of f16's bytes).
// q4 keys are rounded per channel: each (KV head, dim) over a group of
// kKeyGroup positions, with an f16 step and minimum (asymmetric), because
// keys' channels differ in size and offset far more than positions do
// (docs/PERFORMANCE.md 5.2: a quarter of the per-position rounding's loss).
// The group's codes change as its positions arrive, so the cache keeps the
// group being written of each (layer, sequence) in f16 (its "stage") and
// rounds the group again from it. q4 values are rounded per position, one
// f16 scale per 32 dimensions (llama.cpp's q4_0: the largest magnitude
// exact), each head rotated first (kv_rotation.h: value() and value_head()
// undo it). KvType::k8v4 stores keys as q8 and values as q4: keys' rounding
// is nearly all of a cache's quality loss, values' the most of its bytes.
//
// Each sequence has a block table: its positions [b * kBlock, (b + 1) *
// kBlock) live in block table(seq)[b]. A block id names the same block in
// every layer. Blocks are reference-counted: sequences whose prompts start
// alike can hold the same full blocks (core/runtime/prefix_cache.h), and a
// block is free again when no one holds it. The first constructor gives each
// sequence n_ctx positions of its own from the start (one user: the tables
// never change); the paged one starts with empty tables that grow as the
// sequences do (a server: memory follows the tokens in flight).
//
// Rings: a sliding-window layer reads only its window, so when the caller
// says how many positions of one sequence a run stores at most (run_tokens,
// the executor's batch), the sliding-window layers keep their blocks in a
// pool of their own, the rings' (ring_pool_blocks(), n_seq rings of
// ring_blocks() by default), and a sequence holds ring blocks only for the
// blocks a run reads or writes: before each run, hold_window() takes them
// for the blocks from the window before its first position to its last, and
// lets go of those behind (attention sinks, when the spec has them, are held
// for good). So those layers' memory stops growing past the window. A pool
// block has at most one ring block, found by its id (ring_of_): sequences
// sharing a block share its ring block too, each holding a reference, and a
// prefix cache (core/runtime/prefix_cache.h) may keep one as well, so that a
// later prompt starting alike finds the window before its first new position.
// Table blocks(layer, seq) of a ringed layer gives each block index its ring
// block (0 where seq holds none: the kernels never read there).
// In a block, per KV head, the attention kernels read two contiguous runs
// (the hardware prefetchers follow them; decode reads the whole cache once
// per token):
//   keys:   [KV head][head_dim][kBlock]   transposed, position fastest: value d of
//           consecutive keys is one vector, scored with keys in lanes (no
//           transposition at run time; cpu/x86/attention_x86.inc)
//   values: [KV head][kBlock][head_dim]   rows
//   q8 only, after either: scales [KV head][kBlock] f32, element = scale * int8
//   q4: the same orders in nibbles. Keys: row (head, dim) is 32 bytes, byte j
//       holding position j (low nibble) and j + 32 (high); after them per KV
//       head f16 steps [2 groups][head_dim], then f16 minimums [2][head_dim],
//       element = minimum + step * code. Values: a row's 32
//       dimensions from 32g are 16 bytes, byte i holding 32g + i (low) and
//       32g + 16 + i (high); after them scales [KV head][head_dim / 32][kBlock]
//       f16, element = scale * (code - 8).
// A block's positions past the ones written hold whatever was there: readers
// mask them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/graph/batch.h"
#include "core/model/model_spec.h"
#include "quant/weight.h"

namespace basalt {

enum class KvType { f16, q8, q4, k8v4 };
const char* kv_type_name(KvType type);
KvType parse_kv_type(std::string_view name);  // "f16", "q8", "q4" or "k8v4"; Error otherwise
// How a cache of `type` stores its keys (kv = 0) or values (kv = 1): f16, q8 or q4.
KvType kv_side_type(KvType type, int kv);
// Whether a cache of `type` stores each key head rotated (kv_rotation.h):
// q8 keys (q8, k8v4), where the rotation's blocks cover head_dim (a power of
// two, or a multiple of 32) and head_dim <= kMaxQ4HeadDim. A few large
// channels (Gemma 3's keys) would set a head's one int8 scale and leave the
// other channels few levels; rotated, every channel holds a share of them
// (docs/PERFORMANCE.md 5.2: on Gemma 3 the keys' own rounding loses a
// twentieth of the KL, the whole q8 cache a third). Attention rotates the
// query alike, (H q) . (H k) = q . k, and key() / key_head() undo it.
bool kv_keys_rotated(KvType type, int64_t head_dim);
// Why a model's heads cannot be cached as `type` ("" when they can): q4 needs
// head_dim a multiple of its 32-dimension groups.
std::string kv_type_unsupported(KvType type, int64_t head_dim);

// The q8 rounding of n values: returns the scale d = max|x| / 127 and sets
// q[i * q_stride] = x[i] * (127 / max|x|) rounded to nearest even (0 for an
// all-zero x), so that x[i] ~ d * q[i]. shaders/kv_store_q8.comp rounds the
// same way, but for GLSL's division (a rare element one step away).
float quantize_kv_q8(const float* x, int64_t n, int8_t* q, int64_t q_stride = 1);
// The q4 keys' rounding of one (KV head, dim) over the n positions of its
// group written so far (x: their values rounded to f16, as the stage holds
// them): with lo and hi their least and greatest, step = f16((hi - lo) /
// 15), minimum = f16(lo), code[i] = min(15, floor((x[i] - minimum) / step +
// 0.5)) clamped to 0..15 (0 where the step is 0 or not finite), so that
// x[i] ~ minimum + step * code[i].
// Returns step | minimum << 16 (both f16). shaders/kv_store_q4.comp rounds
// the same way.
uint32_t quantize_kv_q4_keys(const float* x, int64_t n, uint8_t* code);
// The q4 values' rounding of 32 values (llama.cpp's q4_0): with m the value of
// largest magnitude, d = m / -8 and code[i] = min(15, floor(x[i] / d + 8.5)),
// so that x[i] ~ d * (code[i] - 8). Returns d rounded to f16 (the stored
// scale; codes are computed with the f32 d, as llama.cpp does).
// shaders/kv_store_q4.comp rounds the same way.
uint16_t quantize_kv_q4(const float* x, uint8_t code[32]);

// A block copy (KvCache::copy_block): pool block ids, and in the rings'
// pool (the windowed layers', when ringed) theirs; -1 without rings.
struct KvBlockCopy {
  int32_t src, dst, ring_src = -1, ring_dst = -1;
};

class KvCache {
 public:
  static constexpr int64_t kBlock = 64;
  static constexpr int64_t kMaxQ4HeadDim = 512;
  static constexpr int64_t kKeyGroup = 32;  // q4 keys: positions per step and minimum
  // Blocks that hold this many positions.
  static constexpr int64_t blocks_for(int64_t positions) { return (positions + kBlock - 1) / kBlock; }

  // n_seq sequences of n_ctx positions, each holding its blocks from the
  // start. run_tokens > 0 (the most positions of one sequence a run stores)
  // gives the sliding-window layers rings; 0 keeps every position.
  KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq, KvType type = KvType::f16, int64_t run_tokens = 0);
  // Paged: n_blocks blocks shared by n_seq sequences of at most n_ctx
  // positions each; every table starts empty (grow()). ring_pool: ring
  // blocks for the windowed layers when they are ringed (0: n_seq rings of
  // ring_blocks(); at least one ring, at most n_blocks).
  KvCache(const ModelSpec& spec, int64_t n_ctx, int n_seq, int64_t n_blocks, KvType type, int64_t run_tokens = 0,
          int64_t ring_pool = 0);
  // The blocks one sequence's ring needs: a window and one run of run_tokens
  // positions (and attention sinks); n_ctx's blocks when that is no fewer (no rings).
  static int64_t ring_blocks_for(const ModelSpec& spec, int64_t n_ctx, int64_t run_tokens);

  KvType type() const { return type_; }
  int64_t n_ctx() const { return n_ctx_; }  // the most positions one sequence may have
  int n_seq() const { return n_seq_; }
  int64_t kv_dim() const { return kv_dim_; }
  // The blocks' memory and the q4 keys' stages (stage_bytes).
  size_t bytes() const { return pool_bytes() + stage_bytes(n_layer_, kv_dim_, n_seq_, type_); }
  // What one sequence of `positions` holds: its blocks' keys and values in every layer, and its stages.
  size_t bytes_for(int64_t positions) const {
    return static_cast<size_t>((pool_layers_ * blocks_for(positions) + ring_layers_ * std::min(blocks_for(positions), ring_blocks_)) *
                               pair_bytes()) +
           stage_bytes(n_layer_, kv_dim_, 1, type_);
  }
  // q4 keys: each (layer, sequence) stages the group being written in f16,
  // with each dimension's least and greatest value (72 bytes a dimension).
  static size_t stage_bytes(int64_t n_layer, int64_t kv_dim, int n_seq, KvType type) {
    if (kv_side_type(type, 0) != KvType::q4) return 0;
    return static_cast<size_t>(n_layer * n_seq * kv_dim) * (kKeyGroup * sizeof(uint16_t) + 2 * sizeof(float));
  }
  // What one sequence of n_ctx positions holds in a cache made with this spec, type and run_tokens.
  static size_t bytes(const ModelSpec& spec, int64_t n_ctx, KvType type, int64_t run_tokens = 0);
  // bytes() of a paged cache made with these arguments.
  static size_t bytes(const ModelSpec& spec, int64_t n_ctx, int n_seq, int64_t n_blocks, KvType type, int64_t run_tokens,
                      int64_t ring_pool);
  // The most positions of one sequence a run may store (n_ctx when made without run_tokens).
  int64_t run_tokens() const { return run_tokens_; }
  // Ring blocks one sequence holds at most (0: no layer is ringed), and whether `layer` is.
  int64_t ring_blocks() const { return ring_layers_ > 0 ? ring_blocks_ : 0; }
  bool ringed(int64_t layer) const { return ring_layers_ > 0 && spec_windowed_.at(static_cast<size_t>(layer)); }
  // Makes seq hold the ring blocks that a run storing positions [begin, end)
  // reads and writes (its table must reach end): the window before begin (and
  // the sinks), kept or taken again where a ring block of theirs is still
  // held (by a prefix cache), and new ones for blocks that never had one; it
  // lets go of those behind the window. begin = 0 starts over. False, when
  // too few ring blocks are free, after letting go (then free some and call
  // again). Error when the window before begin is gone (see can_resume()).
  // No-op without rings.
  bool hold_window(int seq, int64_t begin, int64_t end);
  // hold_window() for each sequence of a batch, over its positions there
  // (at most run_tokens() of them: Error otherwise). False as it is.
  bool hold_windows(const Batch& batch);
  // Whether seq may continue at position `from` (dropping what is past it):
  // its windowed layers still have the window before `from` (ring blocks
  // let go of may hold other blocks' positions now).
  bool can_resume(int seq, int64_t from) const;
  // Whether the pool blocks `blocks` (positions from 0, at least up to begin)
  // still have the ring blocks that hold the window before position begin
  // (and the sinks): a prefix cache's blocks a run from begin can continue.
  bool window_kept(const int32_t* blocks, int64_t begin) const;
  // The rings' pool: its size, free ring blocks, and per pool block whether
  // it has one and the references to it (its sequences', a prefix cache's).
  int64_t ring_pool_blocks() const { return ring_layers_ > 0 ? ring_pool_ : 0; }
  int64_t sink_blocks() const { return ring_layers_ > 0 ? sink_blocks_ : 0; }  // held by each sequence for good
  int64_t free_ring_blocks() const { return static_cast<int64_t>(ring_free_.size()); }
  bool has_ring(int32_t block) const { return ring_layers_ > 0 && ring_of_.at(static_cast<size_t>(block)) >= 0; }
  int ring_refs(int32_t block) const { return has_ring(block) ? ring_refs_[static_cast<size_t>(ring_of_[static_cast<size_t>(block)])] : 0; }
  void ref_ring(int32_t block);    // only a block that has one
  void unref_ring(int32_t block);  // the ring block is free again at zero
  // Bytes of one block of keys (kv = 0) or of values (kv = 1) of one layer:
  // kBlock positions of every KV head. The same for both unless k8v4.
  static int64_t block_bytes(int64_t n_head_kv, int64_t head_dim, KvType type, int kv = 0);
  int64_t block_bytes(int kv = 0) const { return block_bytes(n_head_kv_, head_dim_, type_, kv); }
  // Bytes of one position's keys and values in one layer (scales included): what attention reads per position.
  static int64_t position_bytes(int64_t n_head_kv, int64_t head_dim, KvType type) {
    return (block_bytes(n_head_kv, head_dim, type, 0) + block_bytes(n_head_kv, head_dim, type, 1)) / kBlock;
  }
  // Where a q8 or q4 block of keys (kv = 0) or values (1) has its scales, in bytes from the block's start.
  int64_t scales_offset(int kv = 0) const {
    return kv_side_type(type_, kv) == KvType::q4 ? kv_dim_ * kBlock / 2 : kv_dim_ * kBlock;
  }
  // Where KV head h's keys (kv = 0) or values (1) start in a block, and its
  // scales (q8: f32 [kBlock]; q4 keys: f16 steps [2][head_dim] then
  // minimums [2][head_dim]; q4 values: f16 [head_dim / 32][kBlock]; f16: none, 0), in bytes.
  int64_t head_offset(int kv, int64_t h) const {
    const KvType t = kv_side_type(type_, kv);
    return h * head_dim_ * kBlock * (t == KvType::f16 ? 2 : 1) / (t == KvType::q4 ? 2 : 1);
  }
  int64_t head_scales_offset(int kv, int64_t h) const {
    const KvType t = kv_side_type(type_, kv);
    if (t == KvType::f16) return 0;
    if (t == KvType::q4) return scales_offset(kv) + h * (kv == 0 ? head_dim_ * 8 : head_dim_ / 32 * kBlock * 2);
    return scales_offset(kv) + h * kBlock * 4;
  }

  // The pool.
  int64_t n_blocks() const { return n_blocks_; }
  // Blocks in layer's keys (values): the pool's, or the rings'.
  int64_t layer_blocks(int64_t layer) const { return ringed(layer) ? ring_pool_ : n_blocks_; }
  // The table layer's attention reads for seq: table(seq), or its ring blocks, blocks_for(n_ctx) of them.
  const int32_t* blocks(int64_t layer, int seq) const {
    return (ringed(layer) ? rings_ : tables_).at(static_cast<size_t>(seq)).data();
  }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // The longest run of consecutive free block ids: a paged sequence needs
  // none (any free block serves), so this only shows how scattered the free
  // memory is.
  int64_t largest_free_run() const;
  // Sequence seq's blocks, in position order.
  const std::vector<int32_t>& table(int seq) const { return tables_.at(static_cast<size_t>(seq)); }
  // Positions seq can hold without growing.
  int64_t capacity(int seq) const { return static_cast<int64_t>(table(seq).size()) * kBlock; }
  // Appends a free block to seq's table (one reference, seq's); false, and
  // nothing changes, when none is free or the table holds n_ctx positions.
  bool grow(int seq);
  // Appends `block`, held by someone else already, to seq's table (one more
  // reference). Only full blocks are shared: a holder never writes into one.
  void share(int seq, int32_t block);
  // Drops seq's references and empties its table.
  void release(int seq);
  // References to a block (sequences holding it, and a prefix cache's own).
  int refs(int32_t block) const { return refs_.at(static_cast<size_t>(block)); }
  void ref(int32_t block);
  void unref(int32_t block);  // the block is free again at zero
  // Copies block src's keys and values, every layer, over block dst's: a
  // sequence starting with part of a cached block takes a copy of it and
  // writes its own positions after the shared ones (core/runtime/prefix_cache.h).
  // With rings, both must have ring blocks (hold_window() gives dst its own).
  // Returns the ids it copied, for a backend's copy of the cache.
  KvBlockCopy copy_block(int32_t src, int32_t dst);

  // Stores the key and value of (layer, seq, pos), [kv_dim] f32 each, rounded
  // to the cache's type (f16: to nearest even, as core/util/half.h). pos must
  // lie inside seq's table.
  void store(int64_t layer, int seq, int64_t pos, const float* key, const float* value);
  // store() of n tokens (keys and values [n][kv_dim]) at their (seq[t], pos[t]),
  // with the same result; q4 keys round each group once for a run of
  // consecutive positions of one sequence, not once per position.
  void store_batch(int64_t layer, const int32_t* seq, const int32_t* pos, int64_t n, const float* keys, const float* values);
  // store() into an f16 cache of values already rounded to f16 (the CPU
  // rounds them with its vector instructions: cpu/attention.cpp).
  void store_halves(int64_t layer, int seq, int64_t pos, const uint16_t* key, const uint16_t* value);
  // q4 keys: whether (layer, seq)'s stage holds the positions of pos's group
  // before pos, as a store at pos needs; when not, that store reads them back
  // from the block (decoded: a copied block, a sequence begun again). The GPU
  // (gpu/backend_vulkan.cpp) keeps a stage of its own and fills it the same way.
  bool key_stage_holds(int64_t layer, int seq, int64_t pos) const;
  // What a stage that does not is filled with: the keys of pos's group before
  // pos as the block holds them, rounded to f16, into out [kv_dim][kKeyGroup].
  void key_group(int64_t layer, int seq, int64_t pos, float* out) const;
  // Element i of the key and of the value at (layer, seq, pos), as stored (f16 or scale * int8).
  float key(int64_t layer, int seq, int64_t pos, int64_t i) const { return element(0, layer, seq, pos, i); }
  float value(int64_t layer, int seq, int64_t pos, int64_t i) const { return element(1, layer, seq, pos, i); }
  // The head_dim elements of KV head h's key (value) at (layer, seq, pos), as
  // stored, into out: element() a head at a time (finding the block once).
  void key_head(int64_t layer, int seq, int64_t pos, int64_t h, float* out) const { read_head(0, layer, seq, pos, h, out); }
  void value_head(int64_t layer, int seq, int64_t pos, int64_t h, float* out) const { read_head(1, layer, seq, pos, h, out); }
  // The keys (values) of one layer: block id b (of blocks(layer, seq)) at + b
  // * block_bytes(0) (block_bytes(1)), KV head h's elements at +
  // head_offset(kv, h) bytes, its scales at + head_scales_offset(kv, h).
  const uint8_t* key_pool(int64_t layer) const { return pool(0, layer); }
  const uint8_t* value_pool(int64_t layer) const { return pool(1, layer); }
  // The block holding position pos of seq, in key_pool(layer) or value_pool(layer).
  const uint8_t* key_block(int64_t layer, int seq, int64_t pos) const { return block_of(0, layer, seq, pos); }
  const uint8_t* value_block(int64_t layer, int seq, int64_t pos) const { return block_of(1, layer, seq, pos); }

 private:
  const uint8_t* pool(int kv, int64_t layer) const;
  const uint8_t* block_of(int kv, int64_t layer, int seq, int64_t pos) const;
  // Offset in elements of (KV head h, dim d) at position j of a block: keys transposed, values rows.
  int64_t index(int kv, int64_t h, int64_t d, int64_t j) const {
    return kv == 0 ? (h * head_dim_ + d) * kBlock + j : (h * kBlock + j) * head_dim_ + d;
  }
  // q4: the byte of (KV head h, dim d) at position j of a block, the shift of its nibble, and its scale's offset.
  int64_t q4_byte(int kv, int64_t h, int64_t d, int64_t j) const {
    return kv == 0 ? (h * head_dim_ + d) * (kBlock / 2) + j % (kBlock / 2)
                   : (h * kBlock + j) * (head_dim_ / 2) + d / 32 * 16 + d % 16;
  }
  static int q4_shift(int kv, int64_t d, int64_t j) { return kv == 0 ? 4 * static_cast<int>(j / (kBlock / 2)) : 4 * static_cast<int>(d % 32 / 16); }
  // q4: the offset of the f16 scale of (KV head h, dim d) at position j of a block (keys: the step; its minimum 4 head_dim bytes on).
  int64_t q4_scale_at(int kv, int64_t h, int64_t d, int64_t j) const {
    return kv == 0 ? head_scales_offset(0, h) + (j / kKeyGroup * head_dim_ + d) * 2
                   : head_scales_offset(kv, h) + (d / 32 * kBlock + j) * 2;
  }
  void store_side(int kv, int64_t layer, int seq, int64_t pos, const float* x);  // f16, q8, q4 values
  // q4 keys of positions [pos, pos + n) of one sequence, [n][kv_dim].
  void store_q4_keys(int64_t layer, int seq, int64_t pos, int64_t n, const float* keys);
  // q4 keys' stage of each (layer, seq): positions [group, end) of block `block`.
  struct KeyStage {
    int64_t group = -1, end = 0;
    int32_t block = -1;
  };
  int64_t pair_bytes() const { return block_bytes(0) + block_bytes(1); }
  size_t pool_bytes() const { return static_cast<size_t>((pool_layers_ * n_blocks_ + ring_layers_ * ring_pool_) * pair_bytes()); }
  // The rings' pool of a cache made with these arguments (0: no rings).
  static int64_t ring_pool_for(const ModelSpec& spec, int64_t n_ctx, int n_seq, int64_t n_blocks, int64_t run_tokens,
                               int64_t ring_pool);
  // The block indices of seq whose ring blocks it holds: past the sinks'
  // blocks, [lo, hi) (sink_blocks_ <= lo <= hi); of the sinks', the first `sinks`.
  struct Held {
    int64_t lo, hi, sinks;
  };
  bool holds(int seq, int64_t b) const {
    const Held& h = held_[static_cast<size_t>(seq)];
    return b < sink_blocks_ ? b < h.sinks : b >= h.lo && b < h.hi;
  }
  void drop_ring(int seq);  // lets go of every ring block seq holds
  // The first block past the sinks' that a query at position begin reads.
  int64_t window_first_block(int64_t begin) const {
    return std::max(sink_blocks_, std::max<int64_t>(0, begin - window_ + 1) / kBlock);
  }
  float element(int kv, int64_t layer, int seq, int64_t pos, int64_t i) const;
  void read_head(int kv, int64_t layer, int seq, int64_t pos, int64_t h, float* out) const;

  int64_t n_layer_, n_ctx_, kv_dim_, n_head_kv_, head_dim_;
  int n_seq_;
  KvType type_;
  int64_t n_blocks_;
  int64_t run_tokens_, window_, ring_blocks_, sink_blocks_;  // a ring: its attention sinks' blocks, then the window's
  int64_t ring_pool_ = 0;
  std::vector<bool> spec_windowed_;  // per layer: the spec's sliding window applies
  int64_t pool_layers_ = 0, ring_layers_ = 0;
  std::vector<int64_t> layer_at_;  // per layer: its index among the pool's layers or the rings'
  AlignedBytes data_;  // the pool's layers' blocks, then the rings' layers'
  std::vector<std::vector<int32_t>> tables_;
  std::vector<std::vector<int32_t>> rings_;  // per sequence: the ring block of each block index (0 where not held)
  std::vector<Held> held_;                   // per sequence
  std::vector<int32_t> ring_of_;             // per pool block: its ring block, -1 when none
  std::vector<int32_t> ring_refs_, ring_free_;  // per ring block; free ones, taken from the back
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;  // taken from the back: the lowest ids first
  std::vector<KeyStage> stages_;  // q4 keys: [layer][seq]
  std::vector<uint16_t> stage_;   // [layer][seq][kv_dim][kKeyGroup] f16
  std::vector<float> stage_range_;  // [layer][seq][kv_dim]: the least and greatest staged
};

}  // namespace basalt
