#pragma once
// Prometheus text exposition of the scheduler's metrics.
#include <string>

#include "server/scheduler_metrics.h"

namespace ss {

std::string render_metrics(const SchedulerMetrics& m);

}  // namespace ss
