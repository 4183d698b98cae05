#include "exogym/runtime/checkpoint/stop_vote.h"

#include <chrono>
#include <exception>
#include <string>

#include "exogym/runtime/checkpoint/stop_point.h"
#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/runtime/host/interrupt.h"
#include "exogym/runtime/threads/abort_signal.h"

namespace exogym::runtime::checkpoint {

namespace {

// A signal here is seen within a tick; another process's within a few
// (each look is a request to the store).
constexpr auto kTick = std::chrono::milliseconds(50);
constexpr int kTicksPerStoreLook = 4;

}  // namespace

StopVote::StopVote(dist::ProcessMesh& mesh, checkpoint::StopPoint& point, threads::AbortSignal& abort,
                   int64_t max_steps)
    : mesh_(mesh), point_(point), abort_(abort), max_steps_(max_steps), round_(mesh.open_stop_round()) {
  thread_ = std::thread([this] { loop(); });
}

StopVote::~StopVote() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void StopVote::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    post(max_steps_ + 1, false);
  } catch (const std::exception&) {
    // The store is gone: the mesh's own failure handling reports it.
  }
}

void StopVote::post(int64_t step, bool asked) {
  if (posted_) return;
  mesh_.propose_stop(round_, step, asked);
  posted_ = true;
}

void StopVote::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (int tick = 0;; ++tick) {
    if (stop_cv_.wait_for(lock, kTick, [&] { return stopping_; })) return;
    if (abort_.aborted()) return;
    try {
      if (!posted_) {
        const bool asked = host::interrupt_requested();
        if (asked || (tick % kTicksPerStoreLook == 0 && mesh_.stop_asked(round_))) post(point_.propose(), asked);
      }
      if (posted_) {
        if (const auto stop = mesh_.agreed_stop(round_)) {
          point_.agree(*stop);
          return;
        }
      }
    } catch (const std::exception& e) {
      abort_.trigger(std::string("the processes could not agree where to stop after the signal: ") + e.what());
      return;
    }
  }
}

}  // namespace exogym::runtime::checkpoint
