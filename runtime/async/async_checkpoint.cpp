#include "exogym/runtime/async/async_checkpoint.h"

#include "exogym/sdk/error.h"

namespace exogym::runtime::async {

checkpoint::AsyncPart save_async_state(const AsyncSchedule& schedule, int rank, bool server) {
  checkpoint::AsyncPart part;
  if (!schedule.connected(rank)) return part;
  schedule.save_node(rank, server, part.tensors, part.meta);
  return part;
}

namespace {

bool has_server(const checkpoint::AsyncPart& part) {
  auto it = part.tensors.lower_bound("server.");
  return it != part.tensors.end() && it->first.compare(0, 7, "server.") == 0;
}

}  // namespace

void restore_async_state(AsyncSchedule& schedule, int rank, bool server, const checkpoint::AsyncPart& saved,
                         const std::string& file, const std::filesystem::path& folder, int64_t step) {
  const bool written_async = !saved.meta.is_null();
  if (schedule.connected(rank) != written_async) {
    throw sdk::DataError(file + ": " +
                         (written_async ? "written by an asynchronous run, resumed with a synchronous strategy"
                                        : "written by a synchronous run, resumed with an asynchronous strategy"));
  }
  if (!written_async) return;
  try {
    if (server && !has_server(saved) && rank != 0) {
      checkpoint::AsyncPart with_server = saved;
      for (auto& [key, tensor] : checkpoint::read_node_state(folder, 0, step).async.tensors)
        if (key.compare(0, 7, "server.") == 0) with_server.tensors.emplace(key, tensor);
      schedule.restore_node(rank, server, with_server.tensors, with_server.meta);
      return;
    }
    schedule.restore_node(rank, server, saved.tensors, saved.meta);
  } catch (const nlohmann::json::exception& e) {
    throw sdk::DataError(file + ": metadata \"async\": not an asynchronous node's state (" + e.what() + ")");
  }
}

}  // namespace exogym::runtime::async
