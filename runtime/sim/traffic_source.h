#pragma once
// Who a collective's traffic belongs to. The strategy's is what a real
// cluster would send. The runtime's own (the initial broadcast of node 0's
// weights, the averaging behind the global evaluation and the final model)
// is a simulator artefact: it is counted separately and does not advance the
// simulated clocks.

namespace exogym::runtime::sim {

enum class TrafficSource { Strategy, Runtime };

const char* to_string(TrafficSource source);

}  // namespace exogym::runtime::sim
