// Shows that the poison works: linked after the poisoned library without
// exogym_resolve_first, as an executable would be linked in the usual way,
// its call lands in the poisoned copy (exit status 86).
//   exogym_interposition_canary filesystem|gloo
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "exogym/build_config.h"
#if EXOGYM_HAVE_GLOO
#include <gloo/transport/tcp/device.h>
#endif

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "filesystem") == 0) {
    std::error_code ec;
    std::filesystem::remove_all("/nonexistent/exogym-interposition-canary", ec);
    return 0;
  }
#if EXOGYM_HAVE_GLOO
  if (argc == 2 && std::strcmp(argv[1], "gloo") == 0) {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    gloo::transport::tcp::CreateDevice(attr);
    return 0;
  }
#endif
  std::fprintf(stderr, "usage: exogym_interposition_canary filesystem|gloo (gloo in builds with Gloo)\n");
  return 2;
}
