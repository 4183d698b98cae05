#include "exogym/runtime/comm/cross_process_waits.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "exogym/runtime/comm/collective_call.h"

namespace exogym::runtime::comm {

namespace {

using Wait = CrossProcessWaits::Wait;
using Group = std::vector<int>;

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  return parts;
}

Group members_of(const std::string& text) {
  Group members;
  for (const auto& m : split(text, ',')) members.push_back(std::stoi(m));
  return members;
}

std::string text_of(const Group& members) {
  std::string text;
  for (int m : members) text += (text.empty() ? "" : ",") + std::to_string(m);
  return text;
}

// Every report, read: the waits by rank, each rank's process, each
// process's count of posts and its meetings begun by group.
struct Reports {
  std::map<int, Wait> waits;
  std::map<int, int> process_of;
  std::map<int, uint64_t> posts;
  std::map<int, std::map<Group, uint64_t>> begun;

  // One report (a malformed one is skipped: reports are the runtime's own).
  void read(int q, const std::string& report) {
    const std::vector<std::string> lines = split(report, '\n');
    if (lines.empty()) return;
    try {
      posts[q] = std::stoull(lines[0]);
      for (size_t i = 1; i < lines.size(); ++i) {
        const std::vector<std::string> f = split(lines[i], '\t');
        if (f.size() == 3 && f[0] == "C") {
          begun[q][members_of(f[1])] = std::stoull(f[2]);
          continue;
        }
        if (f.size() < 4) continue;
        Wait w;
        w.rank = std::stoi(f[0]);
        w.changes = std::stoull(f[1]);
        w.in_group = f[2] == "G";
        if (w.in_group) {
          if (f.size() < 6) continue;
          w.meeting = std::stoull(f[3]);
          w.members = members_of(f[4]);
          w.what = f[5];
        } else {
          w.what = f[3];
        }
        process_of[w.rank] = q;
        waits[w.rank] = std::move(w);
      }
    } catch (const std::exception&) {
      posts.erase(q);
    }
  }

  // Whether member `y`, not waiting in x's meeting, has not begun it either:
  // its process said so (unknown: not yet).
  bool not_begun(const Wait& x, int y) const {
    auto q = process_of.find(y);
    if (q == process_of.end()) return false;
    auto counts = begun.find(q->second);
    if (counts == begun.end()) return false;
    auto count = counts->second.find(x.members);
    return count != counts->second.end() && count->second <= x.meeting;
  }
};

}  // namespace

std::string CrossProcessWaits::report(const std::vector<Wait>& waits,
                                      const std::vector<std::pair<std::vector<int>, uint64_t>>& begun) {
  std::string out;
  for (const auto& w : waits) {
    out += "\n" + std::to_string(w.rank) + "\t" + std::to_string(w.changes) + "\t";
    if (w.in_group) {
      out += "G\t" + std::to_string(w.meeting) + "\t" + text_of(w.members) + "\t" + w.what;
    } else {
      out += "E\t" + w.what;
    }
  }
  for (const auto& [members, count] : begun) out += "\nC\t" + text_of(members) + "\t" + std::to_string(count);
  return out;
}

std::string CrossProcessWaits::check(const std::vector<std::string>& reports) {
  Reports r;
  for (size_t q = 0; q < reports.size(); ++q) r.read(static_cast<int>(q), reports[q]);
  interest_.clear();
  for (const auto& [rank, w] : r.waits)
    if (w.in_group) interest_.insert(w.members);
  // From a node waiting in a group, follow the members it waits for.
  std::string found;
  std::vector<std::pair<int, uint64_t>> chain;
  for (const auto& [origin, start] : r.waits) {
    if (!start.in_group) continue;
    std::set<int> visited;
    chain.clear();
    std::function<std::string(const Wait&)> follow = [&](const Wait& x) -> std::string {
      visited.insert(x.rank);
      chain.emplace_back(x.rank, x.changes);
      for (int y : x.members) {
        auto it = r.waits.find(y);
        if (y == x.rank || it == r.waits.end()) continue;  // itself, or not waiting: it will come
        const Wait& w = it->second;
        if (w.in_group && w.members == x.members && w.meeting == x.meeting) continue;  // it is there
        if (!r.not_begun(x, y)) continue;  // it may have been through it already
        const std::string step =
            "node " + std::to_string(x.rank) + " waits in " + x.what + " for node " + std::to_string(y);
        if (!w.in_group) {
          chain.emplace_back(y, w.changes);
          return step + ", which " + w.what;
        }
        if (y == origin) return step + ", which waits in " + w.what;
        if (visited.count(y)) continue;
        const std::string rest = follow(w);
        if (!rest.empty()) return step + ", while " + rest;
      }
      chain.pop_back();
      return "";
    };
    found = follow(start);
    if (!found.empty()) break;
  }
  Look look;
  look.posts = r.posts;
  if (found.empty()) {
    previous_ = std::move(look);
    return "";
  }
  std::sort(chain.begin(), chain.end());
  look.waits = chain;
  // Confirmed: the same waits at the look before, and every process
  // concerned has posted since.
  bool confirmed = look.waits == previous_.waits;
  std::set<int> processes;
  for (const auto& [rank, changes] : chain) {
    const int q = r.process_of.at(rank);
    processes.insert(q);
    confirmed = confirmed && previous_.posts.count(q) && r.posts.count(q) && r.posts.at(q) > previous_.posts.at(q);
  }
  previous_ = std::move(look);
  if (!confirmed) return "";
  std::string across;
  for (int q : processes) across += (across.empty() ? "" : ", ") + std::to_string(q);
  return "deadlock across processes " + across + ": " + found + kDeadlockAdvice;
}

}  // namespace exogym::runtime::comm
