#include "exogym/runtime/sim/transfers_in_flight.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "exogym/sdk/error.h"

namespace exogym::runtime::sim {

namespace {

std::string started(const Transfer& t) {
  return std::string("the ") + to_string(t.kind) + " started " +
         (t.step < 0 ? std::string("in init()") : "at step " + std::to_string(t.step));
}

const CollectiveKind kKinds[] = {CollectiveKind::AllReduce, CollectiveKind::Broadcast, CollectiveKind::AllGather,
                                 CollectiveKind::Barrier, CollectiveKind::AllToAll};

}  // namespace

double busy_within(const Transfer& t, double from, double to) {
  if (t.begin >= from && t.finish <= to) return t.seconds;
  return std::max(0.0, std::min(t.finish, to) - std::max(t.begin, from));
}

uint64_t TransfersInFlight::add(const Transfer& transfer) {
  Entry fresh{transfer, next_ticket_++, Hold::Held};
  auto later =
      std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.transfer.id > transfer.id; });
  entries_.insert(later, fresh);
  return fresh.ticket;
}

uint64_t TransfersInFlight::claim(const Transfer& transfer) {
  auto same =
      std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.transfer.id == transfer.id; });
  if (same == entries_.end()) return add(transfer);
  if (same->hold != Hold::Unclaimed)
    throw sdk::Error(started(transfer) + " is held by another handle already (was it loaded twice?)");
  const Transfer& mine = same->transfer;
  if (mine.kind != transfer.kind || mine.step != transfer.step || mine.start != transfer.start ||
      mine.begin != transfer.begin || mine.finish != transfer.finish || mine.seconds != transfer.seconds) {
    throw sdk::Error("the saved handle of " + started(transfer) +
                     " does not match the node's meter in the checkpoint (files of two checkpoints mixed?)");
  }
  same->ticket = next_ticket_++;
  same->hold = Hold::Held;
  return same->ticket;
}

TransfersInFlight::Entry* TransfersInFlight::entry(uint64_t ticket) {
  for (auto& e : entries_) {
    if (e.ticket == ticket && e.hold == Hold::Held) return &e;
  }
  return nullptr;
}

const Transfer* TransfersInFlight::find(uint64_t ticket) const {
  for (const auto& e : entries_) {
    if (e.ticket == ticket && e.hold == Hold::Held) return &e.transfer;
  }
  return nullptr;
}

Transfer TransfersInFlight::take(uint64_t ticket) {
  Entry* e = entry(ticket);
  if (!e) {
    throw sdk::Error(
        "wait(): this collective is no longer in flight: the node failed since it started, and lost it (a node "
        "that comes back holds the handles its donor's state gives it in load_recovery_state)");
  }
  const Transfer transfer = e->transfer;
  entries_.erase(entries_.begin() + (e - entries_.data()));
  return transfer;
}

void TransfersInFlight::abandon(uint64_t ticket) noexcept {
  if (Entry* e = entry(ticket)) e->hold = Hold::Abandoned;
}

void TransfersInFlight::check() const {
  for (const auto& e : entries_) {
    if (e.hold == Hold::Abandoned) {
      throw sdk::Error(started(e.transfer) +
                       " was never waited for: its handle (sdk::Pending) was destroyed or assigned over before "
                       "wait()");
    }
    if (e.hold == Hold::Unclaimed) {
      throw sdk::Error("the checkpoint holds " + started(e.transfer) +
                       " in flight, which the strategy did not take back: save its handle with Pending::save in "
                       "save_state and load it with Pending::load in load_state");
    }
  }
}

std::vector<Transfer> TransfersInFlight::transfers() const {
  std::vector<Transfer> all;
  for (const auto& e : entries_) all.push_back(e.transfer);
  return all;
}

nlohmann::json TransfersInFlight::state() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : entries_) {
    const Transfer& t = e.transfer;
    list.push_back({{"id", t.id},
                    {"kind", to_string(t.kind)},
                    {"step", t.step},
                    {"start", t.start},
                    {"begin", t.begin},
                    {"finish", t.finish},
                    {"seconds", t.seconds}});
  }
  return list;
}

void TransfersInFlight::check_state(const nlohmann::json& state) {
  if (!state.is_array()) throw std::invalid_argument("\"in_flight\" is not a list");
  for (const auto& t : state) {
    if (!t.is_object()) throw std::invalid_argument("\"in_flight\" holds something other than an object");
    if (!t.contains("id") || !t.at("id").is_number_unsigned())
      throw std::invalid_argument("an \"in_flight\" transfer's \"id\" is not a count of collectives");
    if (!t.contains("step") || !t.at("step").is_number_integer())
      throw std::invalid_argument("an \"in_flight\" transfer's \"step\" is not a step");
    for (const char* key : {"start", "begin", "finish", "seconds"}) {
      if (!t.contains(key) || !t.at(key).is_number())
        throw std::invalid_argument("an \"in_flight\" transfer's \"" + std::string(key) + "\" is not a number");
    }
    const bool known = t.contains("kind") && t.at("kind").is_string() &&
                       std::any_of(std::begin(kKinds), std::end(kKinds),
                                   [&](CollectiveKind k) { return t.at("kind") == to_string(k); });
    if (!known) throw std::invalid_argument("an \"in_flight\" transfer's \"kind\" is not a collective");
  }
}

void TransfersInFlight::restore(const nlohmann::json& state) {
  entries_.clear();
  for (const auto& t : state) {
    Entry e;
    e.transfer.id = t.at("id");
    for (CollectiveKind k : kKinds) {
      if (t.at("kind") == to_string(k)) e.transfer.kind = k;
    }
    e.transfer.step = t.at("step");
    e.transfer.start = t.at("start");
    e.transfer.begin = t.at("begin");
    e.transfer.finish = t.at("finish");
    e.transfer.seconds = t.at("seconds");
    e.hold = Hold::Unclaimed;
    entries_.push_back(e);
  }
}

}  // namespace exogym::runtime::sim
