#include "exogym/runtime/host/host_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace exogym::runtime::host {

namespace fs = std::filesystem;

namespace {

// The first number in `file` ("max", a missing file, garbage: nullopt).
std::optional<uint64_t> number_in(const fs::path& file) {
  std::ifstream in(file);
  uint64_t value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

std::optional<uint64_t> meminfo_available(const fs::path& meminfo) {
  std::ifstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return std::nullopt;
}

// What the control group still allows: limit − usage, when it has a limit.
std::optional<uint64_t> cgroup_headroom(const fs::path& limit_file, const fs::path& usage_file) {
  const auto limit = number_in(limit_file), usage = number_in(usage_file);
  // cgroup v1 says "no limit" with a huge number (PAGE_COUNTER_MAX pages).
  if (!limit || !usage || *limit >= (uint64_t{1} << 60)) return std::nullopt;
  return *limit > *usage ? *limit - *usage : 0;
}

}  // namespace

std::optional<uint64_t> available_memory(const fs::path& meminfo, const fs::path& cgroup_root) {
  std::optional<uint64_t> available = meminfo_available(meminfo);
  for (const auto& headroom : {cgroup_headroom(cgroup_root / "memory.max", cgroup_root / "memory.current"),
                               cgroup_headroom(cgroup_root / "memory" / "memory.limit_in_bytes",
                                               cgroup_root / "memory" / "memory.usage_in_bytes")}) {
    if (headroom) available = available ? std::min(*available, *headroom) : *headroom;
  }
  return available;
}

std::optional<uint64_t> available_memory() { return available_memory("/proc/meminfo", "/sys/fs/cgroup"); }

}  // namespace exogym::runtime::host
