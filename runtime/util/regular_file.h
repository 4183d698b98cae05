#pragma once
// Reading a file that a user names or that a run folder holds, whatever is
// there instead: a FIFO (opening one for reading blocks until a writer comes,
// forever), a device (/dev/zero never ends), a folder, a loop of symbolic
// links. Each is an sdk::DataError naming the file and what it is.
#include <cstdint>
#include <filesystem>
#include <string>

namespace exogym::runtime::util {

// What is at `path`, following symbolic links, without throwing.
enum class PathKind { Missing, Regular, Directory, Other };
PathKind path_kind(const std::filesystem::path& path);

// The bytes of the regular file `file`, opened without blocking.
// sdk::DataError naming the file when it is missing, not a regular file, a
// loop of symbolic links, unreadable, or larger than `max_bytes`.
std::string read_regular_file(const std::filesystem::path& file, uintmax_t max_bytes = uintmax_t{1} << 32);

// The same checks without reading: a descriptor of the regular file `file`,
// open for reading (with O_NONBLOCK, which reads of a regular file ignore),
// for a reader that streams it (util/text_lines.h). The caller closes it.
// sdk::DataError naming the file when it is missing, not a regular file, a
// loop of symbolic links or unreadable.
int open_regular_file(const std::filesystem::path& file);

}  // namespace exogym::runtime::util
