#pragma once
// The processes of a run spread over several processes or hosts, connected
// to each other by Gloo over TCP: a full mesh of byte exchanges between
// processes (P is small: each process hosts many virtual nodes), used by the
// hierarchical collective backend (hierarchical_group.h).
//
// Failure handling. A process that fails publishes its reason in the
// rendezvous store and closes its connections, so that its peers stop at
// once and report that reason. A peer that dies is noticed when its
// connections close; one that hangs or becomes unreachable, by a heartbeat:
// every process posts one to the store a few times per timeout, and a peer
// whose heartbeat stops for `timeout` is declared lost. A peer that is alive
// but slow (a long step, an evaluation) is waited for, however long, as
// nodes in one process wait for each other.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exogym/runtime/dist/world.h"

namespace gloo {
class Context;
namespace transport {
class Device;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace exogym::runtime::dist {

class StoreConnection;

class ProcessMesh {
 public:
  // Meets the other processes: connects to the store (process 0 hosts it),
  // checks that every process has the same WORLD_SIZE and runs the same
  // manifest (`fingerprint`), connects Gloo, starts the heartbeat. Throws
  // sdk::Error saying what to fix (port in use, master unreachable, a rank
  // taken twice, mismatched world sizes or manifests, a process that never
  // joined within the timeout).
  ProcessMesh(const WorldSpec& world, const std::string& fingerprint);
  // Without finish(): a failed run; process 0 keeps the store up a moment so
  // that the others can read why.
  ~ProcessMesh();
  ProcessMesh(const ProcessMesh&) = delete;
  ProcessMesh& operator=(const ProcessMesh&) = delete;

  int rank() const { return world_.rank; }
  int size() const { return world_.size; }
  const WorldSpec& world() const { return world_; }

  // The run's node count, so that messages say which nodes a process hosts.
  void set_nodes(int nodes);
  // "process 1 (nodes 2-3, pid 4242 on host-b)".
  std::string describe(int process) const;

  // Who takes part in an exchange: every process, or only the members
  // (set_members): in a run whose virtual nodes fail, a process whose nodes
  // are all down sits the collectives out. The two kinds are numbered apart,
  // so that an exchange of either kind meets the same exchange in its peers
  // (Gloo slots) whatever the other kind did.
  enum class Scope { All, Members };

  // Every process (of `scope`) sends `bytes` from `mine` to every other;
  // sizes[q] bytes from process q land at out[q] (out[rank()] is not
  // touched). Every wait ends when a peer fails: throws sdk::Error naming it.
  void all_gather(const void* mine, size_t bytes, const std::vector<void*>& out, const std::vector<size_t>& sizes,
                  Scope scope = Scope::All);
  // `bytes` at `data` go from process `root` to every other (of `scope`).
  void broadcast(void* data, size_t bytes, int root, Scope scope = Scope::All);

  // Messages to and from some processes, outside the numbered exchanges
  // above: the peers pass the same `tag` (collectives over a subgroup of
  // nodes, whose processes meet in no fixed order). Several may run at once
  // from different threads, with different tags; each ends when its own
  // messages are through, or throws sdk::Error when a peer fails.
  struct PeerMessage {
    int peer;
    void* data;
    size_t bytes;
    bool receive;
  };
  void exchange_tagged(const std::vector<PeerMessage>& transfers, uint64_t tag);
  // The processes Scope::Members exchanges among (ascending; every process
  // until the first call), this one among them unless it takes part in no
  // exchange of that scope until the next call. Every process calls it at
  // the same point with the same list: it exchanges among all of them.
  void set_members(std::vector<int> processes);
  const std::vector<int>& members() const { return members_; }
  // Strings of any length, by process.
  std::vector<std::string> all_gather_text(const std::string& mine);
  // The highest of every process's `mine` (an exchange among all).
  uint64_t highest(uint64_t mine);
  void barrier();

  // Agreeing on the step where an interrupted run stops (checkpoint/stop_vote.h).
  // Each run of the session that votes opens a round; every process opens
  // the same rounds in the same order.
  int open_stop_round() { return ++stop_round_; }
  // Posts this process's proposal; `asked`: this process was signalled, so
  // the others are told to propose too.
  void propose_stop(int round, int64_t step, bool asked);
  // Whether some process was asked to stop (does not wait).
  bool stop_asked(int round);
  // The largest proposal once every process made one (does not wait).
  std::optional<int64_t> agreed_stop(int round);

  // Stops the mesh: the first reason wins; it is published for the peers,
  // every wait in progress ends, connections close, the listener hears it.
  void fail(const std::string& reason);
  bool failed() const { return failed_.load(); }
  std::string failure() const;
  // Called when the mesh fails (from whichever thread noticed), so that a
  // run can stop its nodes. One at a time; empty to remove.
  void set_failure_listener(std::function<void(const std::string&)> listener);

  // Deadlocks across processes (comm/cross_process_waits.h): with every
  // heartbeat, `report` says where this process's nodes wait (posted with a
  // count of posts on its first line), and `check` reads every process's
  // latest and returns a deadlock's description, which fails the mesh.
  // Empty functions: no watch. Replacing them waits for a look in progress.
  using WaitReport = std::function<std::string()>;
  using WaitCheck = std::function<std::string(const std::vector<std::string>& reports)>;
  void watch_waits(WaitReport report, WaitCheck check);

  // The end of a successful session: waits for every process, stops the
  // heartbeat and says goodbye; process 0 keeps the store up until every
  // peer has left.
  void finish();

 private:
  // Meeting the others (process_mesh_join.cpp).
  void rendezvous(const std::string& fingerprint);
  void claim_rank();
  void wait_for_hello(int process, std::chrono::steady_clock::time_point deadline);
  void check_hello(int process, const std::string& fingerprint);
  void connect_gloo();
  // Moving bytes (process_mesh_transfer.cpp).
  void exchange(const std::vector<PeerMessage>& transfers, Scope scope);
  void transfer(const std::vector<PeerMessage>& transfers, uint64_t slot);
  const std::vector<int>& processes(Scope scope) const { return scope == Scope::All ? everyone_ : members_; }
  // Noticing lost peers (process_mesh_heartbeat.cpp).
  void start_heartbeat();
  void monitor_loop();
  // One look at the waits (above): a deadlock's description, or "".
  std::string look_at_waits();
  void watchdog_loop();
  void stop_threads();
  // Failures.
  void publish_abort(const std::string& reason);
  // The first other process that published why it failed, and why.
  std::optional<std::pair<int, std::string>> published_abort();
  std::string explain_loss(int peer, const std::string& what);
  [[noreturn]] void throw_failure();

  WorldSpec world_;
  std::unique_ptr<StoreConnection> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  struct Peer {
    std::string host;
    int64_t pid = 0;
  };
  std::vector<Peer> peers_;
  std::atomic<int> nodes_{0};
  int stop_round_ = 0;
  std::vector<int> everyone_, members_;
  uint64_t exchanges_[2] = {0, 0};  // by Scope: this process's exchanges of that kind so far

  mutable std::mutex mutex_;  // guards the fields below
  std::string failure_;
  std::vector<gloo::transport::UnboundBuffer*> waiting_;  // buffers an exchange waits on
  std::vector<char> lost_;                                // peers whose connection broke
  std::atomic<bool> failed_{false};
  std::mutex listener_mutex_;  // held while the listener is called or replaced
  std::function<void(const std::string&)> listener_;
  std::mutex watch_mutex_;  // held while a look runs or the functions are replaced
  WaitReport wait_report_;
  WaitCheck wait_check_;
  uint64_t wait_posts_ = 0;

  std::mutex exchange_mutex_;  // one exchange at a time (Gloo slots are sequential)

  std::thread monitor_, watchdog_;
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::atomic<int64_t> last_store_answer_ms_{0};  // steady clock, for the watchdog
  std::chrono::milliseconds period_;
  bool claimed_ = false;  // this process holds its rank at the store
  bool finished_ = false;
};

}  // namespace exogym::runtime::dist
