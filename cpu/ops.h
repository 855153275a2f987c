// SPDX-License-Identifier: MIT
// The CPU's element-wise, normalization and attention ops. Shapes in comments.
#pragma once

#include <cstdint>

#include "core/graph/op_params.h"
#include "core/model/model_spec.h"
#include "core/graph/batch.h"
#include "core/graph/kv_cache.h"
#include "cpu/activations.h"
#include "cpu/isa.h"

namespace basalt::cpu {

// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w        x, y: [n][d]; may alias.
// yq, when given: also y quantized (cpu/activations.h), each row as it is made.
void rms_norm(const float* x, const float* w, float* y, int64_t n, int64_t d, float eps, QuantizedActs* yq = nullptr);

// Rotates the first rope_dim dims of each head of x: [n][n_head * head_dim], in
// place, by the n tokens' cos and sin in tables (rope_tables(), core/graph/op_params.h).
void rope(float* x, int64_t n, const float* tables, const RopeParams& p);

// y = silu(gate) * up, element-wise; gate, up, y: [n][d]; y may alias gate.
// yq as for rms_norm. Both run the row kernels of selected_isa() (cpu/rows.h).
void swiglu(const float* gate, const float* up, float* y, int64_t n, int64_t d, QuantizedActs* yq = nullptr);
// y = gelu(gate) * up with GELU's tanh form, as swiglu (Gemma's FFN).
float gelu_tanh(float x);
void geglu(const float* gate, const float* up, float* y, int64_t n, int64_t d, QuantizedActs* yq = nullptr);
// y = cap tanh(x / cap) over n values (logit soft-capping); y may alias x. Row kernels as swiglu's.
void softcap(const float* x, float* y, int64_t n, float cap);
// y = a + b; y may alias a.
void add(const float* a, const float* b, float* y, int64_t count);

// For each token t of the batch: stores k[t], v[t] at (layer, seq[t], pos[t])
// of the cache, then out[t] = causal GQA attention of q[t] over positions
// 0..pos[t] of its sequence, with an online softmax (no [n, n] scores).
// q, out: [n][n_head * head_dim]; k, v: [n][n_head_kv * head_dim].
// Runs the kernels of selected_isa() (BASALT_ISA); the overload takes the ISA
// (every variant is tested against attention_ref). See cpu/attention.h.
void attention(const float* q, const float* k, const float* v, float* out, const Batch& batch, KvCache& kv,
               int64_t layer, const ModelSpec& spec);
void attention(const float* q, const float* k, const float* v, float* out, const Batch& batch, KvCache& kv,
               int64_t layer, const ModelSpec& spec, Isa isa);
// The definition (cpu/ref/ops_ref.cpp): one (token, head) at a time, keys in
// order, f16 converted one element at a time, exact expf. Also BASALT_ISA=scalar.
void attention_ref(const float* q, const float* k, const float* v, float* out, const Batch& batch, KvCache& kv,
                   int64_t layer, const ModelSpec& spec);

}  // namespace basalt::cpu
