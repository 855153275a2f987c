// SPDX-License-Identifier: MIT
// Sum and maximum over the whole workgroup (WG invocations, a power of two,
// defined by the includer), for every invocation; call from uniform control
// flow. Portable: a tree in shared memory (log2 WG barriers). SUBGROUP (the
// includer enables GL_KHR_shader_subgroup_arithmetic): each subgroup reduces
// in registers, then one shared value per subgroup (2 barriers).

#ifdef SUBGROUP
shared float red[WG];  // one per subgroup
float group_reduce(float x, bool is_max) {
  const float s = is_max ? subgroupMax(x) : subgroupAdd(x);
  if (subgroupElect()) red[gl_SubgroupID] = s;
  barrier();
  float r = red[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) r = is_max ? max(r, red[i]) : r + red[i];
  barrier();
  return r;
}
#else
shared float red[WG];
float group_reduce(float x, bool is_max) {
  const uint i = gl_LocalInvocationIndex;
  red[i] = x;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (i < s) red[i] = is_max ? max(red[i], red[i + s]) : red[i] + red[i + s];
    barrier();
  }
  const float r = red[0];
  barrier();
  return r;
}
#endif

float group_max(float x) { return group_reduce(x, true); }
float group_sum(float x) { return group_reduce(x, false); }
