// A library that exports poisoned copies of symbols a LibTorch may export
// as well: std::filesystem functions (pip's libtorch.so and libtorch_cpu.so
// carry copies) and Gloo's TCP device (libtorch_cpu.so carries its own
// Gloo). Linked where LibTorch sits in an executable's load order, it
// stands in for such a LibTorch: any call that the dynamic linker resolves
// to it instead of to libstdc++ or to the Gloo we compiled against ends the
// process with status 86 and says which symbol went wrong.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "exogym/build_config.h"
#if EXOGYM_HAVE_GLOO
#include <gloo/transport/tcp/device.h>
#endif

namespace {

[[noreturn]] void poisoned(const char* symbol) {
  const char* before = "interposition: the poisoned copy of ";
  const char* after = " was called: a symbol resolved to a library ahead of the one it was compiled against\n";
  (void)!::write(2, before, std::strlen(before));
  (void)!::write(2, symbol, std::strlen(symbol));
  (void)!::write(2, after, std::strlen(after));
  std::_Exit(86);
}

}  // namespace

namespace std::filesystem {

std::uintmax_t remove_all(const path&) { poisoned("std::filesystem::remove_all(path)"); }
std::uintmax_t remove_all(const path&, std::error_code&) { poisoned("std::filesystem::remove_all(path, error_code)"); }
bool create_directories(const path&) { poisoned("std::filesystem::create_directories(path)"); }
bool create_directories(const path&, std::error_code&) {
  poisoned("std::filesystem::create_directories(path, error_code)");
}
void rename(const path&, const path&) { poisoned("std::filesystem::rename(path, path)"); }
void rename(const path&, const path&, std::error_code&) { poisoned("std::filesystem::rename(path, path, error_code)"); }

}  // namespace std::filesystem

#if EXOGYM_HAVE_GLOO
namespace gloo::transport::tcp {

std::shared_ptr<::gloo::transport::Device> CreateDevice(const struct attr&) {
  poisoned("gloo::transport::tcp::CreateDevice");
}

}  // namespace gloo::transport::tcp
#endif
