#pragma once
// Runs a kernel check once at every dispatch level this CPU and the cap
// allow (util/cpu_features.h), so each clone and target is compared with its
// scalar twin on any machine, not only the one the tests were written on.
#include <gtest/gtest.h>

#include <string>

#include "ops/clones.h"
#include "util/cpu_features.h"

namespace ss::test {

template <class Check>
void at_every_cpu_level(Check&& check) {
  for (CpuLevel level : cpu_levels_to_test()) {
    ScopedCpuCap cap(level);
    SCOPED_TRACE(std::string("cpu level ") + cpu_level_name(level) + ", clones " + clone_level_name());
    check();
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace ss::test
