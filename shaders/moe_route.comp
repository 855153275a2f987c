// SPDX-License-Identifier: MIT
// MoE routing on the device, one workgroup: each token's top k experts by
// router logit (ties: the lower id first, as cpu::route_top_k) with softmax
// weights over the k, then the rows grouped by expert in token order, so
// that matmul_*.comp (GROUPED) run every expert in one dispatch. The route
// buffer (uint words; T = n_tok * k rows, slot t * k + j is token t's j-th):
//   first[n_expert + 1]  expert e's sorted rows are first[e] .. first[e + 1]
//   active[n_expert]     the experts with rows, then n_expert (so a dispatch
//                        over min(n_expert, T) experts covers them all)
//   row_token[T]         the token of each sorted row
//   slot_row[T]          the sorted row of each slot
//   ids[T], weights[T]   each slot's expert and weight (float bits)
#version 450

layout(local_size_x = 256) in;
const uint MAX_EXPERTS = 1024;

layout(binding = 0) readonly buffer Logits { float logits[]; };  // [n_tok][n_expert]
layout(binding = 1) coherent buffer Route { uint route[]; };

layout(push_constant) uniform Params { uint n_tok, n_expert, k; } p;

shared uint start[MAX_EXPERTS];

void main() {
  const uint i = gl_LocalInvocationIndex, E = p.n_expert, K = p.k, T = p.n_tok * K;
  const uint ACTIVE = E + 1, ROW_TOKEN = ACTIVE + E, SLOT_ROW = ROW_TOKEN + T, IDS = SLOT_ROW + T, WEIGHTS = IDS + T;

  // 1. Each token's experts: the j-th is the best after the (j-1)-th in the
  // order (logit descending, id ascending).
  for (uint t = i; t < p.n_tok; t += 256) {
    float prev = 0.0, top = 0.0, total = 0.0;
    uint prev_e = 0;
    for (uint j = 0; j < K; ++j) {
      uint best = E;
      float bl = 0.0;
      for (uint e = 0; e < E; ++e) {
        const float l = logits[t * E + e];
        const bool after = j == 0 || l < prev || (l == prev && e > prev_e);
        if (after && (best == E || l > bl)) best = e, bl = l;
      }
      if (best == E) best = j, bl = logits[t * E + j];  // NaN logits: any k distinct experts
      if (j == 0) top = bl;
      const float wt = exp(bl - top);
      total += wt;
      route[IDS + t * K + j] = best;
      route[WEIGHTS + t * K + j] = floatBitsToUint(wt);
      prev = bl;
      prev_e = best;
    }
    for (uint j = 0; j < K; ++j)
      route[WEIGHTS + t * K + j] = floatBitsToUint(uintBitsToFloat(route[WEIGHTS + t * K + j]) / total);
  }
  memoryBarrierBuffer();
  barrier();

  // 2. Rows per expert, then where each expert's rows start.
  for (uint e = i; e < E; e += 256) {
    uint c = 0;
    for (uint s = 0; s < T; ++s) c += route[IDS + s] == e ? 1 : 0;
    start[e] = c;
  }
  barrier();
  if (i == 0) {
    uint sum = 0, n_active = 0;
    for (uint e = 0; e < E; ++e) {
      const uint c = start[e];
      start[e] = sum;
      route[e] = sum;
      sum += c;
      if (c > 0) route[ACTIVE + n_active++] = e;
    }
    route[E] = sum;
    while (n_active < E) route[ACTIVE + n_active++] = E;
  }
  barrier();

  // 3. Each expert's rows, in token order.
  for (uint e = i; e < E; e += 256) {
    uint r = start[e];
    for (uint s = 0; s < T; ++s)
      if (route[IDS + s] == e) {
        route[ROW_TOKEN + r] = s / K;
        route[SLOT_ROW + s] = r;
        ++r;
      }
  }
}
