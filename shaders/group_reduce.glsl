// SPDX-License-Identifier: MIT
// Sums or maxima over the whole workgroup of RED_N values per invocation,
// for every invocation (WG invocations, a power of two; the includer defines
// WG and RED_N); call from uniform control flow. Portable: a tree in shared
// memory (log2 WG barriers). SUBGROUP (the includer enables
// GL_KHR_shader_subgroup_arithmetic): each subgroup reduces in registers,
// then one shared value per subgroup (2 barriers).

shared float red[RED_N][WG];

#ifdef SUBGROUP
void group_reduce(inout float x[RED_N], bool is_max) {
  for (uint g = 0; g < RED_N; ++g) {
    const float s = is_max ? subgroupMax(x[g]) : subgroupAdd(x[g]);
    if (subgroupElect()) red[g][gl_SubgroupID] = s;
  }
  barrier();
  for (uint g = 0; g < RED_N; ++g) {
    float r = red[g][0];
    for (uint i = 1; i < gl_NumSubgroups; ++i) r = is_max ? max(r, red[g][i]) : r + red[g][i];
    x[g] = r;
  }
  barrier();
}
#else
void group_reduce(inout float x[RED_N], bool is_max) {
  const uint i = gl_LocalInvocationIndex;
  for (uint g = 0; g < RED_N; ++g) red[g][i] = x[g];
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (i < s)
      for (uint g = 0; g < RED_N; ++g) red[g][i] = is_max ? max(red[g][i], red[g][i + s]) : red[g][i] + red[g][i + s];
    barrier();
  }
  for (uint g = 0; g < RED_N; ++g) x[g] = red[g][0];
  barrier();
}
#endif
