#pragma once
// What the exception being handled says, whatever its type: plugins may
// throw anything (`throw 42`), and the runtime reports it instead of letting
// it end the process.
#include <string>

namespace exogym::runtime::util {

// Call only inside a catch block: e.what() for a std::exception (a LibTorch
// error without its C++ stack trace), else a sentence saying that it was not
// one.
std::string current_exception_text();

// Call only inside a catch block: whether the exception is a failed
// allocation (std::bad_alloc, or LibTorch's out-of-memory errors, CPU and
// GPU), which the runtime reports as a size that does not fit.
bool current_exception_is_out_of_memory();

// What a std::exception says without a leading "[json.exception.<kind>]"
// (nlohmann's errors name the library, not the file and field the user
// needs; the caller names those).
std::string without_json_prefix(const std::string& what);

}  // namespace exogym::runtime::util
