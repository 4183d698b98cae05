// exogym-generate: sample text from a trained character-level run, streaming
// each character as it is produced (the reference's shakespeare_inference).
#include <ATen/Parallel.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/tool.h"
#include "exogym/runtime/command/text_generator.h"
#include "exogym/runtime/plugin/plugin_loader.h"

int main(int argc, char** argv) {
  exogym::tools::Tool tool("exogym-generate",
                           "Samples text from the model.pt of a run trained on a text-char dataset, e.g.\n"
                           "  exogym-generate examples/runs/shakespeare-diloco/diloco --prompt \"ROMEO:\"\n"
                           "The prompt is printed, then each sampled character as it comes.");
  exogym::runtime::command::SampleOptions options;
  std::string prompt = "To be or not to be", run_dir;
  std::vector<std::string> plugin_dirs;
  int threads = 1;
  CLI::App& app = tool.app();
  app.add_option("run", run_dir, "the run folder (holding config.json and model.pt)")
      ->required()
      ->type_name("RUN_FOLDER");
  const std::string sampling = "Sampling";
  app.add_option("--prompt", prompt, "text to continue; every character must be in the run's vocabulary")
      ->capture_default_str()
      ->group(sampling);
  // CLI11 converts a number too large for int64 without a word (it saturates):
  // the text itself must fit.
  const CLI::Validator fits_int64(
      [](std::string& text) -> std::string {
        int64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size() || value < 0)
          return "expected a whole number from 0 to " + std::to_string(INT64_MAX) + ", got " + text;
        return "";
      },
      "N");
  app.add_option("--tokens", options.max_tokens, "characters to generate; stops early at EOS")
      ->capture_default_str()
      ->check(fits_int64)
      ->type_name("N")
      ->group(sampling);
  app.add_option("--temperature", options.temperature, "divide the logits by T; 0: always the most likely")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->type_name("T")
      ->group(sampling);
  app.add_option("--top-k", options.top_k, "sample among the K most likely characters (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->type_name("K")
      ->group(sampling);
  app.add_option("--seed", options.seed, "sampling seed: the same seed, the same text")
      ->capture_default_str()
      ->type_name("S")
      ->group(sampling);
  app.add_option("--threads", threads, "LibTorch threads (1 keeps the text the same on any load)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024))
      ->type_name("N");
  app.add_option("--plugin-path", plugin_dirs, "look for the model plugin in DIR first (repeatable)")
      ->type_name("DIR")
      ->allow_extra_args(false);
  return tool.run(argc, argv, [&] {
    tool.make_logger();
    at::set_num_threads(threads);
    exogym::runtime::plugin::PluginLoader loader({plugin_dirs.begin(), plugin_dirs.end()});
    exogym::runtime::command::TextGenerator generator(run_dir, loader);
    generator.encode_prompt(prompt);  // a character outside the vocabulary is an input error
    std::fputs(prompt.c_str(), stdout);
    std::fflush(stdout);
    generator.generate(prompt, options, [](const std::string& text) {
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    });
    std::fputc('\n', stdout);
    return 0;
  });
}
