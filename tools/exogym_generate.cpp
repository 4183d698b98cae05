// exogym-generate: sample text from a trained character-level run, streaming
// each character as it is produced (the reference's shakespeare_inference).
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/lm/text_generator.h"
#include "exogym/sdk/error.h"

namespace {

const char* kUsage = R"(usage: exogym-generate [options] RUN_FOLDER

Samples text from the model.pt of a run trained on a text-char dataset, e.g.
  exogym-generate examples/runs/shakespeare-diloco/diloco --prompt "ROMEO:"
The prompt is printed, then each sampled character as it comes.

options:
  --prompt TEXT        text to continue (default "To be or not to be"); every
                       character must be in the run's vocabulary
  --tokens N           characters to generate (default 100); stops early at EOS
  --temperature T      divide the logits by T (default 0.8); 0: always the most likely
  --top-k K            sample among the K most likely characters (default 40; 0: all)
  --seed S             sampling seed (default 1337): the same seed, the same text
  --threads N          LibTorch threads (default 1, which keeps the text the same on any load)
  --plugin-path DIR    look for the model plugin in DIR first (repeatable)
  -h, --help           this text
)";

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "exogym-generate: %s\n%s", message.c_str(), kUsage);
  std::exit(2);
}

template <class T>
T parse_number(const std::string& flag, const std::string& text) {
  try {
    size_t used = 0;
    T value;
    if constexpr (std::is_floating_point_v<T>) {
      value = static_cast<T>(std::stod(text, &used));
    } else {
      value = static_cast<T>(std::stoll(text, &used));
    }
    if (used != text.size()) throw std::invalid_argument(text);
    return value;
  } catch (const std::exception&) {
    usage_error(flag + " expects a number, got \"" + text + "\"");
  }
}

}  // namespace

int main(int argc, char** argv) {
  exogym::runtime::lm::SampleOptions options;
  std::string prompt = "To be or not to be";
  std::string run_dir;
  std::vector<std::filesystem::path> plugin_dirs;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else if (arg == "--prompt") {
      prompt = value();
    } else if (arg == "--tokens") {
      options.max_tokens = parse_number<int64_t>(arg, value());
      if (options.max_tokens < 0) usage_error("--tokens must be >= 0");
    } else if (arg == "--temperature") {
      options.temperature = parse_number<double>(arg, value());
      if (!(options.temperature >= 0)) usage_error("--temperature must be >= 0");
    } else if (arg == "--top-k") {
      options.top_k = parse_number<int64_t>(arg, value());
      if (options.top_k < 0) usage_error("--top-k must be >= 0");
    } else if (arg == "--seed") {
      options.seed = parse_number<uint64_t>(arg, value());
    } else if (arg == "--threads") {
      threads = parse_number<int>(arg, value());
      if (threads < 1) usage_error("--threads must be >= 1");
    } else if (arg == "--plugin-path") {
      plugin_dirs.emplace_back(value());
    } else if (!arg.empty() && arg[0] == '-') {
      usage_error("unknown option " + arg);
    } else if (run_dir.empty()) {
      run_dir = arg;
    } else {
      usage_error("more than one run folder given (" + run_dir + ", " + arg + ")");
    }
  }
  if (run_dir.empty()) usage_error("no run folder given");

  at::set_num_threads(threads);
  try {
    exogym::runtime::plugin::PluginLoader loader(plugin_dirs);
    exogym::runtime::lm::TextGenerator generator(run_dir, loader);
    try {
      generator.encode_prompt(prompt);
    } catch (const exogym::sdk::DataError& e) {
      std::fprintf(stderr, "exogym-generate: %s\n", e.what());
      return 2;
    }
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
    generator.generate(prompt, options, [](const std::string& text) {
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    });
    std::fputc('\n', stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "exogym-generate: %s\n", e.what());
    return 1;
  }
}
