// SPDX-License-Identifier: MIT
#include "cpu/isa.h"

#include <atomic>
#include <cstdlib>

#if defined(BASALT_X86)
#include <cpuid.h>
#include <cstring>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(BASALT_ARM) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "core/error.h"

namespace basalt {

namespace {
std::atomic<int> g_forced{-1};

Isa parse_isa(const std::string& s) {
  if (s == "scalar") return Isa::scalar;
  if (s == "avx2") return Isa::avx2;
  if (s == "avxvnni") return Isa::avxvnni;
  if (s == "avx512") return Isa::avx512;
  if (s == "amx") return Isa::amx;
  if (s == "neon") return Isa::neon;
  if (s == "dotprod") return Isa::dotprod;
  throw Error("BASALT_ISA=" + s + " is not one of scalar, avx2, avxvnni, avx512, amx, neon, dotprod");
}
#if defined(BASALT_X86)
// One CPUID bit (reg: 0-3 for EAX-EDX), for what __builtin_cpu_supports does
// not name on every compiler (clang 14 knows neither "f16c" nor "avxvnni").
bool cpuid_bit(unsigned leaf, unsigned subleaf, int reg, int bit) {
  unsigned r[4];
  if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return r[reg] >> bit & 1;
}
// Each read once: in a virtual machine CPUID traps to the hypervisor, and
// the attention asks for the bf16 dots at every call (1.2% of a server's
// samples, docs/PERFORMANCE.md 9.10).
bool has_f16c() {
  static const bool has = cpuid_bit(1, 0, 2, 29);  // ECX 29
  return has;
}
bool has_avxvnni() {
  static const bool has = cpuid_bit(7, 1, 0, 4);  // leaf 7.1 EAX 4
  return has;
}
bool has_avx512_bf16() {
  static const bool has = cpuid_bit(7, 1, 0, 5);  // leaf 7.1 EAX 5
  return has;
}

// CPUID says whether the cores have AMX-TILE, AMX-INT8 and AMX-BF16 (every
// AMX CPU so far has all three); Linux (5.16 on) must also grant this process
// the tile state, once, before any thread uses it.
bool amx_usable() {
  if (!cpuid_bit(7, 0, 3, 24) || !cpuid_bit(7, 0, 3, 25) || !cpuid_bit(7, 0, 3, 22)) return false;  // EDX: TILE, INT8, BF16
#if defined(__linux__)
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif
}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avxvnni: return "avxvnni";
    case Isa::avx512: return "avx512";
    case Isa::amx: return "amx";
    case Isa::neon: return "neon";
    case Isa::dotprod: return "dotprod";
  }
  return "?";
}

bool cpu_supports(Isa isa) {
#if defined(BASALT_X86)
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c() &&
             __builtin_cpu_supports("bmi2");
    case Isa::avxvnni:
#if defined(BASALT_AVXVNNI_AS_EVEX)  // CMake's BASALT_AVXVNNI_AS_EVEX: timing the kernels on AVX-512 VNNI
      return cpu_supports(Isa::avx2) && (has_avxvnni() || cpu_supports(Isa::avx512));
#else
      return cpu_supports(Isa::avx2) && has_avxvnni();
#endif
    case Isa::avx512:
      return cpu_supports(Isa::avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni");
    case Isa::amx: {
      static const bool amx = amx_usable();
      return cpu_supports(Isa::avx512) && amx;
    }
    case Isa::neon:
    case Isa::dotprod: return false;
  }
  return false;
#elif defined(BASALT_ARM)
  if (isa == Isa::scalar || isa == Isa::neon) return true;  // Advanced SIMD: every AArch64 Linux CPU
#if defined(__linux__)
  if (isa == Isa::dotprod) return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#endif
  return false;
#else
  return isa == Isa::scalar;
#endif
}

Isa best_isa() {
  static const Isa best = cpu_supports(Isa::dotprod)   ? Isa::dotprod
                          : cpu_supports(Isa::neon)    ? Isa::neon
                          : cpu_supports(Isa::amx)     ? Isa::amx
                          : cpu_supports(Isa::avx512)  ? Isa::avx512
                          : cpu_supports(Isa::avxvnni) ? Isa::avxvnni
                          : cpu_supports(Isa::avx2)    ? Isa::avx2
                                                       : Isa::scalar;
  return best;
}

void set_isa(Isa isa) {
  if (!cpu_supports(isa)) throw Error(std::string("this CPU does not support the ") + isa_name(isa) + " kernels");
  g_forced = static_cast<int>(isa);
}

bool cpu_has_avx512_bf16() {
#if defined(BASALT_X86)
  return cpu_supports(Isa::avx512) && has_avx512_bf16();
#else
  return false;
#endif
}

bool cpu_is_amd() {
#if defined(BASALT_X86)
  static const bool amd = [] {
    unsigned max_leaf, vendor[3];
    if (!__get_cpuid(0, &max_leaf, &vendor[0], &vendor[2], &vendor[1])) return false;  // EBX, EDX, ECX
    return std::memcmp(vendor, "AuthenticAMD", 12) == 0;
  }();
  return amd;
#else
  return false;
#endif
}

Isa selected_isa() {
  int forced = g_forced.load();
  if (forced >= 0) return static_cast<Isa>(forced);
  static const Isa from_env = [] {
    const char* env = std::getenv("BASALT_ISA");
    if (!env || !*env) return best_isa();
    Isa isa = parse_isa(env);
    if (!cpu_supports(isa)) throw Error(std::string("BASALT_ISA=") + env + ": this CPU does not support it");
    return isa;
  }();
  return from_env;
}

}  // namespace basalt
