#pragma once
// The cores this process may use, for the thread plan (threads/thread_plan.h).
namespace exogym::runtime::host {

// The number of hardware threads this process may use: its CPU affinity
// (a container or taskset may give it fewer than the machine has).
int available_cores();

}  // namespace exogym::runtime::host
