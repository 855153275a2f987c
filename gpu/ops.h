// SPDX-License-Identifier: MIT
// The GPU ops: each records one dispatch of its shader on a stream, on
// buffers the caller owns. The CPU kernels are their reference
// (tests/unit/gpu_ops_test.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/device.h"
#include "core/graph/kv_cache.h"
#include "core/graph/op_params.h"
#include "gpu/stream.h"
#include "quant/weight.h"

namespace basalt::gpu {

// A weight on the device as the CPU holds it (qa: tiles of 16 rows,
// quant/qa_layout.h; dense: rows), in as many buffers as the device's binding
// and allocation limits need (whole tiles each; a dense "tile" is a row).
struct GpuMatrix {
  struct Part {
    std::unique_ptr<Buffer> buffer;
    int64_t first_tile, tiles;  // of the whole (stacked) weight
  };
  std::vector<Part> parts;
  std::string shader;
  bool dense = false;
  int64_t rows = 0, cols = 0, mat_rows = 0, tiles_per_mat = 0, rows_per_tile = 16;
  size_t tile_bytes = 0;
};

// The matmul shader for a weight, or "" when there is none (act-order input
// permutations, and dense rows not a whole number of 32-bit words, stay on the CPU).
std::string matmul_shader(const Weight& w);
// Copies the weight to the device (throws GpuError, out_of_memory() when it
// does not fit). max_part_bytes: a smaller limit per buffer than the device's
// (tests). With an uploader, the copies may still run when it returns (they
// end by uploader->finish()); without, they are done.
GpuMatrix upload_matrix(Device& device, const Weight& w, size_t max_part_bytes = 0, Uploader* uploader = nullptr);

// y[t][y_offset + t * ldy + r] = sum_k W_mat[r][k] x[x_offset + t * ldx + k], t < n_tok, r < mat_rows.
// From kTiledMatmulTokens tokens on, a tiled GEMM (weights read once per 32 tokens).
struct MatmulOp {
  const GpuMatrix* w;
  int64_t mat = 0;  // which stacked matrix (MoE expert)
  const Buffer* x;
  int64_t x_offset = 0, ldx = 0;
  const Buffer* y;
  int64_t y_offset = 0, ldy = 0;
  int64_t n_tok = 0;
};
// From this many tokens the tiled GEMM; fewer, the GEMV (matmul_qa.comp, 4 tokens a
// workgroup). On an H200 the GEMV is faster at 16 tokens (a server's default batch) on
// every 7B shape measured, and a 16-sequence decode 1.2x (docs/PERFORMANCE.md 4.1b).
constexpr int64_t kTiledMatmulTokens = 17;
void matmul(Device& device, Stream& stream, const MatmulOp& op);

// MoE experts on the device, without the host knowing how many rows each
// expert got. moe_route: from router logits (f32 [n_tok][n_expert], n_expert
// <= 1024) to the route (uint words, moe_route_words(); shaders/moe_route.comp
// gives its layout): each token's top k experts (cpu::route_top_k's choice and
// weights) and the n_tok * k rows grouped by expert.
constexpr int64_t kMaxRoutedExperts = 1024;
size_t moe_route_words(int64_t n_tok, int64_t n_expert, int64_t k);
void moe_route(Device& device, Stream& stream, const Buffer& logits, const Buffer& route, int64_t n_tok,
               int64_t n_expert, int64_t k);
// Every expert's rows in one dispatch per buffer: for expert e's sorted rows r,
// y[r * ldy + i] = sum_k W_e[i][k] x[row * ldx + k], row = the token of r
// (gather) or r. n_tok: the tokens routed, k experts each.
struct GroupedMatmulOp {
  const GpuMatrix* w;  // the experts' matrices stacked
  const Buffer* route;
  int64_t n_expert = 0, n_tok = 0, k = 0;
  bool gather = false;
  const Buffer* x;
  int64_t ldx = 0;
  const Buffer* y;
  int64_t ldy = 0;
};
void grouped_matmul(Device& device, Stream& stream, const GroupedMatmulOp& op);
// y[y_offset + t * ldy + j] = sum over token t's k slots of weight * ye[its sorted row][j], j < d.
void moe_combine(Device& device, Stream& stream, const Buffer& ye, const Buffer& route, const Buffer& y,
                 int64_t y_offset, int64_t ldy, int64_t n_tok, int64_t d, int64_t n_expert, int64_t k);

// Attention of n_tok query rows of one sequence against its cached keys and
// values (any KvType, the CPU cache's block layout: core/graph/kv_cache.h; q4
// values read rotated: the caller rotates the output back, kv_rotate_rows): token
// t sees positions up to pos[t] (and, with a window, only the last window).
struct AttentionOp {
  const Buffer* q;  // [n_tok][ldq] floats from q_offset: n_head x head_dim each
  int64_t q_offset = 0, ldq = 0;
  const Buffer* k;
  const Buffer* v;
  KvType kv_type = KvType::f16;
  const Buffer* table;  // int32 block ids: the sequence's block b is table[table_offset + b]
  int64_t table_offset = 0;
  int64_t block_bytes = 0;  // a block of keys (of values: KvCache::block_bytes(.., 1), which differs for q4 and k8v4)
  const Buffer* pos;  // int32 [n_tok] from pos_offset
  int64_t pos_offset = 0;
  const Buffer* o;  // [n_tok][ldo] floats from o_offset
  int64_t o_offset = 0, ldo = 0;
  int64_t n_tok = 0, n_head = 0, n_head_kv = 0, head_dim = 0, window = 0;
  // Split-K (decode: few workgroups otherwise): a scratch of attention_partial_bytes(head_dim)
  // and the largest position of the tokens; nullptr / -1: no split.
  const Buffer* partial = nullptr;
  int64_t max_pos = -1;
  float scale = 0;  // the queries' (0: 1 / sqrt(head_dim))
  int64_t sinks = 0;  // with a window: the first positions, seen too (--attention-sinks)
  float softcap = 0;  // > 0: scores soft-capped, softcap tanh(s / softcap) (Gemma 2)
};
bool attention_supported(int64_t head_dim, KvType kv = KvType::f16);
size_t attention_partial_bytes(int64_t head_dim);
void attention(Device& device, Stream& stream, const AttentionOp& op);

// Stores n_tok keys and values (f32 [n_tok][kv_dim]) at their positions into
// the device caches k_cache, v_cache (the CPU cache's type and layout), token
// t into the block at byte base[t] (its position's); rounded as KvCache::store
// rounds (f16: the same bits; q8: see kv_store_q8.comp).
struct KvStoreOp {
  const Buffer *k, *v, *pos, *base, *k_cache, *v_cache;
  int64_t n_tok = 0, kv_dim = 0, head_dim = 0;
  KvType kv_type = KvType::f16;
  // q4 keys: the layer's stage on the device (as KvCache's, which holds f16:
  // here floats [seq][kv_dim][32], values rounded to f16; each sequence's key
  // group being written, its positions before the batch's put there by the
  // host where the CPU's stage does not hold them: key_stage_holds) and each
  // token's sequence (int32). A sequence's tokens consecutive positions, together.
  const Buffer *stage = nullptr, *seq = nullptr;
};
// Bytes of a layer's q4 key stage for n_seq sequences.
size_t kv_stage_bytes(int64_t n_seq, int64_t kv_dim);
// Before kv_store of n tokens (seq[t], pos[t]) into a q4 cache: uploads to
// `stage` the key group of each sequence whose stage the CPU's cache (`kv`,
// not yet holding the batch) does not hold (KvCache::key_stage_holds): its
// positions before the batch's, as the cache holds them (key_group). A
// sequence's tokens must be together, at consecutive positions (Error, not
// GpuError: a caller's fault, not the device's).
void kv_stage_fill(Stream& stream, const Buffer& stage, const KvCache& kv, int64_t layer, const int32_t* seq, const int32_t* pos,
                   int64_t n);
void kv_store(Device& device, Stream& stream, const KvStoreOp& op);
// Rotates n_rows rows of n_heads heads (floats, rows ld apart from offset) in
// place as a q4 cache rotates its values' heads (kv_rotate): attention's
// output after it read q4 values.
void kv_rotate_rows(Device& device, Stream& stream, const Buffer& x, int64_t offset, int64_t ld, int64_t n_rows,
                    int64_t n_heads, int64_t head_dim);

// y[i] = silu(gate[i]) * up[i], i < n; y may be gate.
void swiglu(Device& device, Stream& stream, const Buffer& gate, const Buffer& up, const Buffer& y, int64_t n);
// y[i] = a[i] + b[i % b_len], i < n (b_len 0: n; a row's width: a bias on every row); y may be a.
void add(Device& device, Stream& stream, const Buffer& a, const Buffer& b, const Buffer& y, int64_t n, int64_t b_len = 0);

// Rows [n][d] from x_offset to y_offset (floats; y may be x): y = x / rms(x) * w (w: d floats).
void rms_norm(Device& device, Stream& stream, const Buffer& x, int64_t x_offset, const Buffer& w, const Buffer& y,
              int64_t y_offset, int64_t n, int64_t d, float eps);
// RoPE in place on [n][n_head * head_dim] from x_offset, with the tables of
// rope_tables() (core/graph/op_params.h) for the n tokens' positions uploaded to `tables`.
void rope(Device& device, Stream& stream, const Buffer& x, int64_t x_offset, const Buffer& tables, int64_t n,
          const RopeParams& p);

}  // namespace basalt::gpu
