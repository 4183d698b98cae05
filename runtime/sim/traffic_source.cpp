#include "exogym/runtime/sim/traffic_source.h"

namespace exogym::runtime::sim {

const char* to_string(TrafficSource source) { return source == TrafficSource::Strategy ? "strategy" : "runtime"; }

}  // namespace exogym::runtime::sim
