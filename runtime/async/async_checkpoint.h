#pragma once
// An asynchronous strategy's runtime state (async/async_schedule.h) in a
// node's checkpoint file (checkpoint/node_state.h's AsyncPart): what is on
// its way to or from the server, the steps it computed, and with the
// process's first node (`server`) the server's state.
#include <cstdint>
#include <filesystem>
#include <string>

#include "exogym/runtime/async/async_schedule.h"
#include "exogym/runtime/checkpoint/node_state.h"

namespace exogym::runtime::async {

checkpoint::AsyncPart save_async_state(const AsyncSchedule& schedule, int rank, bool server);

// Puts it back when the node's strategy connected (init() ran).
// sdk::DataError naming `file` when the checkpoint and the strategy
// disagree on being asynchronous. With `server`, the server's state comes
// from the node's file, or when the checkpoint was written by another
// layout of processes (its first node was not a process's first), from
// node 0's in `folder`.
void restore_async_state(AsyncSchedule& schedule, int rank, bool server, const checkpoint::AsyncPart& saved,
                         const std::string& file, const std::filesystem::path& folder, int64_t step);

}  // namespace exogym::runtime::async
