#include "exogym/runtime/dist/world.h"

#include <cstdlib>
#include <string>

#include "exogym/runtime/dist/run_secret.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::dist {

namespace {

// An integer environment variable; `fallback` when unset or empty.
int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (!value || !*value) return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < -1 || parsed > 1000000) {
    throw sdk::ConfigError(name, std::string("expected an integer, got \"") + value + "\"");
  }
  return static_cast<int>(parsed);
}

}  // namespace

WorldSpec world_from_environment() {
  WorldSpec world;
  world.size = env_int("WORLD_SIZE", 1);
  world.rank = env_int("RANK", 0);
  world.master_port = env_int("MASTER_PORT", world.master_port);
  world.local_size = env_int("LOCAL_WORLD_SIZE", 1);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr && *addr) world.master_addr = addr;
  world.secret = run_secret_from_environment();
  return world;
}

void validate_world(const WorldSpec& world) {
  if (world.size < 1) throw sdk::ConfigError("WORLD_SIZE", "must be at least 1, got " + std::to_string(world.size));
  if (world.rank < 0 || world.rank >= world.size) {
    throw sdk::ConfigError("RANK", "rank " + std::to_string(world.rank) + " does not exist in a world of " +
                                       std::to_string(world.size) + " process" + (world.size == 1 ? "" : "es") +
                                       " (ranks 0 to " + std::to_string(world.size - 1) + ")");
  }
  if (world.distributed()) {
    if (world.master_port < 1 || world.master_port > 65535) {
      throw sdk::ConfigError("MASTER_PORT",
                             "expected a TCP port (1 to 65535), got " + std::to_string(world.master_port));
    }
    if (world.master_addr.empty()) throw sdk::ConfigError("MASTER_ADDR", "is empty");
    if (world.secret.empty()) {
      throw sdk::ConfigError(kSecretVariable, std::string("a run over several processes needs a shared secret: set ") +
                                                  kSecretVariable + " (or " + kSecretFileVariable +
                                                  ", a file holding it) to the same value for every process; "
                                                  "--nproc does it for you");
    }
  }
  if (world.timeout.count() <= 0) throw sdk::ConfigError("--timeout", "must be positive");
  if (world.local_size < 1) {
    throw sdk::ConfigError("LOCAL_WORLD_SIZE", "must be at least 1, got " + std::to_string(world.local_size));
  }
}

NodeBlock node_block(int nodes, int processes, int process) {
  auto first = [&](int p) { return static_cast<int>(static_cast<int64_t>(p) * nodes / processes); };
  return NodeBlock{first(process), first(process + 1) - first(process)};
}

int process_of_node(int node, int nodes, int processes) {
  for (int p = processes - 1; p > 0; --p) {
    if (node_block(nodes, processes, p).first <= node) return p;
  }
  return 0;
}

std::string describe_block(const NodeBlock& block) {
  if (block.count == 1) return "node " + std::to_string(block.first);
  return "nodes " + std::to_string(block.first) + "-" + std::to_string(block.first + block.count - 1);
}

}  // namespace exogym::runtime::dist
