#include "exogym/runtime/util/exception_text.h"

#include <c10/util/Exception.h>

#include <exception>
#include <new>

namespace exogym::runtime::util {

std::string current_exception_text() {
  try {
    throw;
  } catch (const c10::Error& e) {
    // what() appends a stack trace of LibTorch's internals (27 lines for an
    // allocation that failed), which says nothing to a user.
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "threw an exception that is not a std::exception (e.g. `throw 42`)";
  }
}

bool current_exception_is_out_of_memory() {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return true;
  } catch (const c10::OutOfMemoryError&) {
    return true;
  } catch (const c10::Error& e) {
    // LibTorch's CPU allocator throws a plain c10::Error: "DefaultCPUAllocator:
    // can't allocate memory: you tried to allocate N bytes" (1.13; 2.x says
    // "not enough memory").
    return std::string(e.what_without_backtrace()).find("DefaultCPUAllocator") != std::string::npos;
  } catch (...) {
    return false;
  }
}

std::string without_json_prefix(const std::string& what) {
  if (what.rfind("[json.exception.", 0) != 0) return what;
  const size_t end = what.find("] ");
  return end == std::string::npos ? what : what.substr(end + 2);
}

}  // namespace exogym::runtime::util
