// SPDX-License-Identifier: MIT
// What the matmul shaders share: their parameters, and which rows, tokens
// and weights a workgroup works on. Workgroups: x over rows, y over tokens,
// z over experts (GROUPED).
//
// Plain: y[t][r] = W[r] . x[t] for the n_tok tokens, W's rows from the
// dispatch's first (in the buffer: unit `first`, `count` units; a unit is a
// tile of 16 rows for qa, a row for dense).
// GROUPED (MoE experts in one dispatch): z picks an expert e with rows (the
// route's z-th active one: moe_route.comp), which multiplies its rows,
// route[e] .. route[e + 1] in sorted order: y[sorted row] = W_e . x[token
// of the row, or the sorted row]. The buffer holds units first .. first +
// count of the stacked experts.

layout(push_constant) uniform Params {
  uint rows;       // rows of the matrix (plain: from the dispatch's first)
  uint cols;
  uint n_tok;      // plain: tokens
  uint first;      // see above
  uint count;
  uint row_words;  // dense: 32-bit words per row
  uint x_offset, ldx, y_offset, ldy;  // floats
  uint units_per_mat;  // GROUPED: units of one expert's matrix
  uint n_expert;       // GROUPED
  uint gather;         // GROUPED: 1 when x has a row per token, 0 when per sorted row
} p;

#ifdef GROUPED
layout(binding = 3) readonly buffer Route { uint route[]; };  // moe_route.comp's layout
uint expert() { return route[p.n_expert + 1 + gl_WorkGroupID.z]; }  // n_expert: none
uint tokens() { return expert() < p.n_expert ? route[expert() + 1] - route[expert()] : 0; }
uint x_row(uint t) { return p.gather != 0 ? route[2 * p.n_expert + 1 + route[expert()] + t] : route[expert()] + t; }
uint y_row(uint t) { return route[expert()] + t; }
// Unit u of the expert's matrix: where it lies in the buffer, if it does.
bool unit_in_buffer(uint u, out uint at) {
  const uint g = expert() * p.units_per_mat + u;
  at = g - p.first;
  return g >= p.first && g < p.first + p.count;
}
#else
uint tokens() { return p.n_tok; }
uint x_row(uint t) { return t; }
uint y_row(uint t) { return t; }
bool unit_in_buffer(uint u, out uint at) {
  at = p.first + u;
  return u < p.count;
}
#endif
