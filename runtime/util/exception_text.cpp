#include "exogym/runtime/util/exception_text.h"

#include <exception>

namespace exogym::runtime::util {

std::string current_exception_text() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "threw an exception that is not a std::exception (e.g. `throw 42`)";
  }
}

}  // namespace exogym::runtime::util
