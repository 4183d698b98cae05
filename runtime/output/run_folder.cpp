#include "exogym/runtime/output/run_folder.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "exogym/sdk/error.h"

namespace exogym::runtime::output {

namespace fs = std::filesystem;

fs::path create_run_folder(const fs::path& base) {
  if (base.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(base.parent_path(), ec);
    if (ec) throw sdk::Error(base.parent_path().string() + ": cannot create the output folder: " + ec.message());
  }
  for (int i = 1;; ++i) {
    const fs::path candidate = i == 1 ? base : fs::path(base.string() + "-" + std::to_string(i));
    // mkdir is the claim: it fails with EEXIST for every process but one.
    if (::mkdir(candidate.c_str(), 0777) == 0) return candidate;
    if (errno != EEXIST) {
      throw sdk::Error(candidate.string() + ": cannot create the run folder: " + std::strerror(errno));
    }
  }
}

}  // namespace exogym::runtime::output
