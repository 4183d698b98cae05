#pragma once
// Sampling text from a trained run (exogym-generate): the run folder's
// config.json names the model plugin and its resolved options and the
// character vocabulary of its text-char dataset; model.pt holds the weights.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exogym/runtime/data/char_vocabulary.h"

namespace exogym::sdk {
class Model;
}

namespace exogym::runtime::plugin {
class PluginLoader;
class LoadedPlugin;
}  // namespace exogym::runtime::plugin

namespace exogym::runtime::command {

struct SampleOptions {
  int64_t max_tokens = 100;  // tokens to generate (fewer when EOS comes first)
  double temperature = 0.8;  // 0: always the most likely token
  int64_t top_k = 40;        // sample among the k most likely tokens; 0: all
  uint64_t seed = 1337;
  bool stop_at_eos = true;
};

class TextGenerator {
 public:
  // Rebuilds the model of the run in `run_dir` and loads its model.pt.
  // Throws sdk::Error naming the folder or file: no such folder (or a folder
  // of variants, naming them), no config.json or model.pt, a run whose
  // training data is not a text-char dataset, weights that do not fit.
  TextGenerator(const std::filesystem::path& run_dir, plugin::PluginLoader& loader);
  ~TextGenerator();

  const data::CharVocabulary& vocabulary() const { return *vocabulary_; }

  // The prompt's token ids. Throws sdk::DataError naming the first character
  // outside the vocabulary and its offset.
  std::vector<int64_t> encode_prompt(const std::string& prompt) const;

  // Continues `prompt` by up to options.max_tokens sampled characters and
  // returns them (without the prompt), calling `on_text` with each one as it
  // is produced. The same seed gives the same text. Throws sdk::DataError for
  // a prompt character outside the vocabulary, sdk::Error for bad options.
  std::string generate(const std::string& prompt, const SampleOptions& options,
                       const std::function<void(const std::string&)>& on_text = {});

 private:
  std::shared_ptr<plugin::LoadedPlugin> plugin_;  // outlives model_ (its code is in the plugin)
  std::shared_ptr<sdk::Model> model_;
  std::unique_ptr<data::CharVocabulary> vocabulary_;
};

}  // namespace exogym::runtime::command
