#pragma once
// Where this process stands in a run spread over several processes (or
// hosts), configured the torchrun way: WORLD_SIZE processes, this one is RANK,
// and they meet at a rendezvous store on MASTER_ADDR:MASTER_PORT, hosted by
// process 0. Command-line flags override the environment.
//
// The run's K virtual nodes are dealt out in contiguous blocks: process p
// hosts nodes [first(p), first(p+1)) with first(p) = floor(p*K/P), so blocks
// differ in size by at most one node when P does not divide K.
#include <chrono>
#include <string>

namespace exogym::runtime::dist {

struct WorldSpec {
  int size = 1;  // WORLD_SIZE: processes in the run
  int rank = 0;  // RANK: this process, 0 to size-1
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // torchrun's default
  // How long a process waits for the others to join at the start, and for a
  // peer that shows no sign of life (died, hung, unreachable) before it
  // gives up with an error.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // Reduce floating-point sums over per-process partial sums (K/P times less
  // traffic between processes, last bits differ from a single-process run)
  // instead of over every node's contribution in rank order on every process
  // (bit-identical to a single-process run, the default).
  bool partial_reduce = false;
  // LOCAL_WORLD_SIZE: processes of this run on this host; they share its cores.
  int local_size = 1;
  // What every process proves it holds at the rendezvous (run_secret.h);
  // required with several processes. Never logged.
  std::string secret;

  bool distributed() const { return size > 1; }
};

// Reads WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT, LOCAL_WORLD_SIZE and the
// run secret from the environment (unset: a single process). Throws
// sdk::ConfigError naming the variable when one is malformed.
WorldSpec world_from_environment();

// Checks the ranges (RANK < WORLD_SIZE, a valid port, a positive timeout)
// and, with several processes, that there is a secret.
// Throws sdk::ConfigError naming the setting.
void validate_world(const WorldSpec& world);

struct NodeBlock {
  int first = 0;  // the first node this process hosts
  int count = 0;  // how many
  bool contains(int node) const { return node >= first && node < first + count; }
};

// The nodes process `process` of `processes` hosts, out of `nodes`.
NodeBlock node_block(int nodes, int processes, int process);
// The process that hosts `node`.
int process_of_node(int node, int nodes, int processes);
// "nodes 2-3", "node 2".
std::string describe_block(const NodeBlock& block);

}  // namespace exogym::runtime::dist
