#pragma once
// Runs a kernel check once at every dispatch level this CPU and the cap
// allow (util/cpu_features.h), so each clone and target is compared with its
// scalar twin on any machine, not only the one the tests were written on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/clones.h"
#include "util/cpu_features.h"

namespace ss::test {

template <class Check>
void at_levels(const std::vector<CpuLevel>& levels, Check&& check) {
  for (CpuLevel level : levels) {
    ScopedCpuCap cap(level);
    SCOPED_TRACE(std::string("cpu level ") + cpu_level_name(level) + ", clones " + clone_level_name());
    check();
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Every level that changes anything usable: for the matmul kernels, which
// look at every feature bit.
template <class Check>
void at_every_cpu_level(Check&& check) {
  at_levels(cpu_levels_to_test(), check);
}

// Every level that changes the vector clone (AVX-512, AVX2, baseline): a
// Zen 5 at native walks native, avx2, sse4, not avxvnni as well, which runs
// the avx2 clones again.
template <class Check>
void at_every_clone_level(Check&& check) {
  at_levels(cpu_levels_to_test(kCloneFeatures), check);
}

}  // namespace ss::test
