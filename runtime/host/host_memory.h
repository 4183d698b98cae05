#pragma once
// The memory this process can still take from its host, for the size check
// before a run builds its replicas.
#include <cstdint>
#include <filesystem>
#include <optional>

namespace exogym::runtime::host {

// MemAvailable of /proc/meminfo (what can be allocated without swapping),
// or less when this process's control group limits it (cgroup v2
// memory.max − memory.current, v1 memory.limit_in_bytes − usage_in_bytes).
// nullopt where none of these can be read (not Linux).
std::optional<uint64_t> available_memory();

// The same from the given files, for tests; a missing file is left out.
std::optional<uint64_t> available_memory(const std::filesystem::path& meminfo,
                                         const std::filesystem::path& cgroup_root);

}  // namespace exogym::runtime::host
