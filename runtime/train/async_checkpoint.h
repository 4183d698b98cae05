#pragma once
// An asynchronous strategy's runtime state (sim/async_schedule.h) in a
// node's checkpoint file (checkpoint/node_state.h's AsyncPart): what is on
// its way to or from the server, the server's state with the process's
// first node (`server`), and the steps the node computed.
#include <cstdint>
#include <string>

#include "exogym/runtime/checkpoint/node_state.h"
#include "exogym/runtime/sim/async_schedule.h"

namespace exogym::runtime::train {

checkpoint::AsyncPart save_async_state(const sim::AsyncSchedule& schedule, int rank, bool server,
                                       int64_t steps_computed);

// Puts it back when the node's strategy connected (init() ran); returns the
// steps the node had computed (0 for a synchronous run). sdk::DataError
// naming `file` when the checkpoint and the strategy disagree on being
// asynchronous.
int64_t restore_async_state(sim::AsyncSchedule& schedule, int rank, bool server, const checkpoint::AsyncPart& saved,
                            const std::string& file);

}  // namespace exogym::runtime::train
