#include "exogym/runtime/async/async_processes.h"

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "exogym/runtime/comm/named_tensor_broadcast.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::async {

namespace {

using News = AsyncSchedule::NodeNews;

// The fields of "<rank>.news", in order (whole numbers are exact in a double).
enum Field { kLife, kSteps, kPulls, kPullFrom, kSent, kUpdate, kArrival, kUpload, kBase, kUpdateLife, kCount, kFields };

void encode(const News& n, comm::NamedTensorList& out) {
  std::vector<double> f(kFields, 0.0);
  f[kLife] = static_cast<double>(n.life);
  f[kSteps] = static_cast<double>(n.steps_computed);
  f[kPulls] = n.pull_from ? 1 : 0;
  f[kPullFrom] = n.pull_from.value_or(0);
  f[kSent] = n.sent ? 1 : 0;
  f[kUpdate] = n.update ? 1 : 0;
  if (n.update) {
    f[kArrival] = n.update->arrival;
    f[kUpload] = n.update->upload;
    f[kBase] = static_cast<double>(n.update->base_version);
    f[kUpdateLife] = static_cast<double>(n.update->life);
    f[kCount] = static_cast<double>(n.update->tensors.size());
  }
  const std::string head = std::to_string(n.rank) + ".";
  out.emplace_back(head + "news", at::tensor(f, at::kDouble));
  if (!n.update) return;
  for (size_t i = 0; i < n.update->tensors.size(); ++i)
    out.emplace_back(head + "update." + std::to_string(i), n.update->tensors[i]);
}

// The news in `list` (as encode() wrote them, node after node) appended to `out`.
void decode(const comm::NamedTensorList& list, std::vector<News>& out) {
  for (size_t at = 0; at < list.size();) {
    const std::string& name = list[at].first;
    const size_t dot = name.find('.');
    EXOGYM_CHECK_INTERNAL(dot != std::string::npos && name.substr(dot + 1) == "news",
                          "asynchronous news out of order at " + name);
    const at::Tensor fields = list[at].second.contiguous();
    EXOGYM_CHECK_INTERNAL(fields.numel() == kFields, "asynchronous news of another size");
    const double* f = fields.data_ptr<double>();
    News n;
    n.rank = std::stoi(name.substr(0, dot));
    n.life = static_cast<int64_t>(f[kLife]);
    n.steps_computed = static_cast<int64_t>(f[kSteps]);
    if (f[kPulls] != 0) n.pull_from = f[kPullFrom];
    n.sent = f[kSent] != 0;
    ++at;
    if (f[kUpdate] != 0) {
      AsyncSchedule::InFlight update;
      update.rank = n.rank;
      update.arrival = f[kArrival];
      update.upload = f[kUpload];
      update.base_version = static_cast<int64_t>(f[kBase]);
      update.life = static_cast<int64_t>(f[kUpdateLife]);
      const auto count = static_cast<size_t>(f[kCount]);
      EXOGYM_CHECK_INTERNAL(at + count <= list.size(), "an asynchronous update cut short");
      for (size_t i = 0; i < count; ++i) update.tensors.push_back(list[at + i].second);
      at += count;
      n.update = std::move(update);
    }
    out.push_back(std::move(n));
  }
}

}  // namespace

AsyncSchedule::ShareNews share_async_news(dist::ProcessMesh& mesh) {
  return [&mesh](std::vector<News> mine) {
    comm::NamedTensorList encoded;
    for (const auto& n : mine) encode(n, encoded);
    std::vector<News> all;
    // Process by process: their blocks of nodes come in rank order.
    for (int root = 0; root < mesh.size(); ++root) {
      if (root == mesh.rank()) {
        for (auto& n : mine) all.push_back(std::move(n));
        comm::broadcast_named_tensors(mesh, root, encoded, "the asynchronous nodes' news");
      } else {
        decode(comm::broadcast_named_tensors(mesh, root, {}, "the asynchronous nodes' news"), all);
      }
    }
    return all;
  };
}

}  // namespace exogym::runtime::async
