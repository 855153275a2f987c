// SPDX-License-Identifier: MIT
// Thread count: physical cores by default (SMT siblings share the FMA units
// and memory bandwidth that bound inference).
#pragma once

namespace basalt {

int physical_core_count();
// Sets the OpenMP threads of the engine; n <= 0 means physical_core_count().
void set_thread_count(int n);
int thread_count();

}  // namespace basalt
