#pragma once
#include <cstdint>

#include "exogym/runtime/sim/network_model.h"
#include "exogym/runtime/sim/traffic_source.h"

namespace exogym::runtime::sim {

// One row of comm.csv: the collectives of one kind and source in one step,
// summed over all nodes.
struct CommRow {
  int64_t step = 0;
  TrafficSource source = TrafficSource::Strategy;
  CollectiveKind kind = CollectiveKind::AllReduce;
  int64_t calls = 0;
  double bytes_sent = 0;  // all nodes together
  double time_s = 0;      // modelled transfer time (strategy traffic only)
};

}  // namespace exogym::runtime::sim
