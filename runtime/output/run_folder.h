#pragma once
// Claiming a run folder: an existing run folder is never overwritten; a
// numeric suffix is added (docs/manifest.md#run-outputs).
#include <filesystem>

namespace exogym::runtime::output {

// Creates `base`, or base-2, base-3, ...: the first that mkdir(2) creates,
// so that two runs started together with the same name never share a
// folder (checking for existence and creating later would race). The
// folders above `base` are created as needed. Throws sdk::Error naming the
// folder when one cannot be created for another reason than existing.
std::filesystem::path create_run_folder(const std::filesystem::path& base);

}  // namespace exogym::runtime::output
