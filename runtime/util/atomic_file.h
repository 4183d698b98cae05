#pragma once
// Writing a file so that a reader sees the old file or the whole new one,
// never a part of it, whatever happens while it is written (a full disk, a
// crash, a kill). Every output that is written once (config.json,
// summary.json, model files, checkpoints) goes through here.
#include <filesystem>
#include <string_view>

namespace exogym::runtime::util {

// Writes `bytes` to a fresh temporary file in `file`'s folder, flushes it to
// the disk (fsync), then renames it over `file` and syncs the folder. On any
// failure the temporary file is removed, `file` is left as it was, and an
// sdk::Error names `file` and the reason (a failure while running: exit 1).
void write_file_atomically(const std::filesystem::path& file, std::string_view bytes);

// Makes renames in `folder` durable (a folder renamed into it, say).
void sync_folder(const std::filesystem::path& folder);

}  // namespace exogym::runtime::util
