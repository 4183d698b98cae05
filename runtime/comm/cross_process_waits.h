#pragma once
// Deadlocks whose nodes live in different processes
// (docs/plugins.md#subgroups-and-peers). Within a process, group_meetings.h
// sees every node's wait and stops a cycle at once; across processes a
// node waiting for a remote member only sees that the member does not
// come. So every process posts, a few times a second (the mesh's heartbeat,
// dist/process_mesh.h), a report of where its nodes wait, and reads the
// others': a node waiting in a group for a member that waits elsewhere (in
// a collective over every node, a meeting between steps, or the end of its
// run), or in a group that leads back to it, is a deadlock. Reports are
// snapshots taken at different moments, so a deadlock counts only when two
// looks, between which every process concerned posted again, find the same
// waits unchanged: the waits then held together at the first look, and
// waits in a deadlock never end. A member in another process that is
// elsewhere may also have been through the meeting already (its process
// sent its part, which is still on its way): each process therefore posts
// how many meetings it began of every group others were seen waiting in,
// and a wait counts only for a member whose process has not begun it.
//
// A report: the poster's count of reports on its first line, then a line
// per waiting node, tab-separated: rank, its count of state changes, and
// "E" with what it does, or "G", its group's count of meetings before this
// one, the members (comma-separated) and its call; and a line per group of
// interest: "C", the members and the meetings begun.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace exogym::runtime::comm {

class CrossProcessWaits {
 public:
  struct Wait {
    int rank = 0;
    uint64_t changes = 0;
    bool in_group = false;     // else: waits elsewhere
    std::vector<int> members;  // in_group: the group
    uint64_t meeting = 0;      // in_group: its meeting
    std::string what;          // the call, or what it does elsewhere
  };

  // The lines of a report, without its first: the waits, and the meetings
  // begun of each group of interest (members, count) that has a member here.
  static std::string report(const std::vector<Wait>& waits,
                            const std::vector<std::pair<std::vector<int>, uint64_t>>& begun);

  // The groups other processes' nodes waited in at the last look: those
  // whose counts this process posts.
  const std::set<std::vector<int>>& interest() const { return interest_; }

  // Every process's latest report, by process (empty: none posted yet).
  // Returns the description of a deadlock confirmed by this look and the
  // one before it, naming the nodes and what each waits in; "" otherwise.
  std::string check(const std::vector<std::string>& reports);

 private:
  struct Look {
    std::vector<std::pair<int, uint64_t>> waits;  // the deadlock's nodes and their counts of changes
    std::map<int, uint64_t> posts;                // the reports' counts, by process
  };
  Look previous_;
  std::set<std::vector<int>> interest_;
};

}  // namespace exogym::runtime::comm
