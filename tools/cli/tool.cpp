#include "cli/tool.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "exogym/build_config.h"
#include "exogym/runtime/host/interrupt.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/plugin.h"
#include "exogym/sdk/plugin_abi.h"

namespace exogym::tools {

ExitStatus exit_status_of(const std::exception& error) {
  if (dynamic_cast<const runtime::host::Interrupted*>(&error)) return kInterrupted;
  // What the user gave is wrong: the manifest, a flag's value, a file.
  if (dynamic_cast<const sdk::ConfigError*>(&error) || dynamic_cast<const sdk::DataError*>(&error) ||
      dynamic_cast<const sdk::PluginError*>(&error) || dynamic_cast<const CLI::Error*>(&error)) {
    return kUsageError;
  }
  return kFailure;
}

spdlog::level::level_enum LogOptions::resolve(spdlog::level::level_enum fallback) const {
  if (!level.empty()) return spdlog::level::from_str(level);
  if (quiet) return std::max(fallback, spdlog::level::warn);
  return static_cast<spdlog::level::level_enum>(std::max(0, static_cast<int>(fallback) - verbose));
}

std::string version_text(const std::string& tool) {
  return tool + " " + EXOGYM_VERSION + " (plugin ABI " + std::to_string(sdk::runtime_abi_version()) + ", " +
         sdk::runtime_fingerprint() + ")";
}

Tool::Tool(std::string name, const std::string& description)
    : name_(std::move(name)), display_name_(name_), app_(std::make_unique<CLI::App>(description, name_)) {
  app_->set_version_flag("--version", version_text(name_));
  app_->get_formatter()->column_width(28);
  app_->option_defaults()->group("Options");
  const std::string group = "Output";
  app_->add_flag("-v,--verbose", log_.verbose, "log more: -v debug, -vv trace")->group(group);
  app_->add_option("--log-level", log_.level, "log level, winning over -v and -q")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->group(group);
  app_->add_flag("-q,--quiet", log_.quiet, "only warnings and errors, no progress")->group(group);
}

std::shared_ptr<spdlog::logger> Tool::make_logger(const std::string& pattern) const {
  auto logger = spdlog::get("exogym");
  if (!logger) logger = spdlog::stderr_color_mt("exogym");
  logger->set_pattern(pattern);
  logger->set_level(log_.resolve());
  return logger;
}

int Tool::report(const std::exception& error) const {
  const ExitStatus status = exit_status_of(error);
  std::fflush(stdout);
  switch (status) {
    case kInterrupted:
      std::fprintf(stderr, "\n%s: %s; the run folder keeps what was written so far\n", display_name_.c_str(),
                   error.what());
      break;
    case kUsageError:
      if (!input_.empty()) {
        std::fprintf(stderr, "%s: %s: %s\n", display_name_.c_str(), input_.c_str(), error.what());
      } else {
        std::fprintf(stderr, "%s: %s\n", display_name_.c_str(), error.what());
      }
      break;
    default:
      std::fprintf(stderr, "\n%s: error: %s\n", display_name_.c_str(), error.what());
  }
  return status;
}

void exit_without_teardown(int status) {
  spdlog::shutdown();
  std::fflush(nullptr);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  std::exit(status);
#else
  std::_Exit(status);
#endif
}

int Tool::run(int argc, char** argv, const std::function<int()>& body) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app_->exit(e);  // --help, --version
    std::fprintf(stderr, "%s: %s\nRun with --help for the options.\n", name_.c_str(), e.what());
    return kUsageError;
  }
  try {
    return body();
  } catch (const std::exception& e) {
    return report(e);
  } catch (...) {
    // A plugin may throw anything; it is still a failure, never a crash.
    std::fprintf(stderr, "\n%s: error: an exception that is not a std::exception\n", display_name_.c_str());
    return kFailure;
  }
}

}  // namespace exogym::tools
