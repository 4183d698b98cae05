#pragma once
// An asynchronous strategy over several processes (async/async_schedule.h):
// how the processes tell each other, at each meeting between slots, what
// their nodes did. Each process in turn sends its nodes' news to the
// others as named tensors (comm/named_tensor_broadcast.h): per node a
// float64 tensor "<rank>.news" of its counts, times and flags, and its
// update's tensors "<rank>.update.<i>".
#include "exogym/runtime/async/async_schedule.h"

namespace exogym::runtime::dist {
class ProcessMesh;
}

namespace exogym::runtime::async {

AsyncSchedule::ShareNews share_async_news(dist::ProcessMesh& mesh);

}  // namespace exogym::runtime::async
