#pragma once
// What the exception being handled says, whatever its type: plugins may
// throw anything (`throw 42`), and the runtime reports it instead of letting
// it end the process.
#include <string>

namespace exogym::runtime::util {

// Call only inside a catch block: e.what() for a std::exception, else a
// sentence saying that it was not one.
std::string current_exception_text();

}  // namespace exogym::runtime::util
