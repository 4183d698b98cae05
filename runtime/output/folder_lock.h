#pragma once
// One exogym-run at a time writes a run folder: two resumes of one folder
// started together both cut its CSVs, rewrote config.json and mixed their
// rows. The lock is flock(2) on the folder itself, so no file is left
// behind, and the kernel drops it when the process ends however it ends
// (SIGKILL included): a dead run never holds it.
#include <filesystem>

namespace exogym::runtime::output {

class FolderLock {
 public:
  // Takes the lock of `folder` without waiting: sdk::DataError naming the
  // folder when another process holds it, sdk::Error when it cannot be
  // opened.
  explicit FolderLock(const std::filesystem::path& folder);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace exogym::runtime::output
