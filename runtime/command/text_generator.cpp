#include "exogym/runtime/command/text_generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/topk.h>
#include <torch/nn/module.h>

#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "exogym/runtime/data/text_char.h"
#include "exogym/runtime/output/model_pt.h"
#include "exogym/runtime/plugin/plugin_loader.h"
#include "exogym/runtime/util/regular_file.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/model.h"

namespace exogym::runtime::command {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_config(const fs::path& run_dir) {
  std::error_code ec;
  if (!fs::exists(run_dir, ec)) throw sdk::DataError(run_dir.string() + ": no such run folder");
  if (!fs::is_directory(run_dir, ec)) throw sdk::DataError(run_dir.string() + ": not a folder (expected a run folder)");
  const fs::path file = run_dir / "config.json";
  if (!fs::exists(file, ec)) {
    // The folder of a manifest with "runs" holds one run folder per variant.
    std::set<std::string> found;
    for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
      if (entry.is_directory() && fs::exists(entry.path() / "config.json")) found.insert(entry.path().string());
    }
    std::string variants;
    for (const auto& variant : found) variants += (variants.empty() ? "" : ", ") + variant;
    if (!variants.empty()) {
      throw sdk::DataError(run_dir.string() + ": a folder of variants, not a run folder; pick one of: " + variants);
    }
    throw sdk::DataError(run_dir.string() + ": no config.json; not a run folder written by exogym-run");
  }
  try {
    return json::parse(util::read_regular_file(file));
  } catch (const json::exception& e) {
    throw sdk::DataError(file.string() + ": not valid JSON: " + e.what());
  }
}

// config.json's value at a path of keys, or an error naming the file and path.
const json& at_path(const json& config, const std::vector<std::string>& keys, const fs::path& file) {
  const json* node = &config;
  std::string path;
  for (const auto& key : keys) {
    path += (path.empty() ? "" : ".") + key;
    if (!node->is_object() || !node->contains(key)) throw sdk::DataError(file.string() + ": has no " + path);
    node = &(*node)[key];
  }
  return *node;
}

void load_weights(torch::nn::Module& module, const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    throw sdk::DataError(file.string() +
                         ": no such file (the run stopped before its end, or had output.save_model "
                         "false)");
  }
  std::map<std::string, at::Tensor> saved;
  for (auto& [name, tensor] : output::read_model_pt(file)) saved[name] = std::move(tensor);
  at::NoGradGuard no_grad;
  auto restore = [&](const std::string& name, at::Tensor target) {
    auto it = saved.find(name);
    if (it == saved.end())
      throw sdk::DataError(file.string() + ": has no tensor \"" + name + "\" that the model needs");
    if (it->second.sizes() != target.sizes()) {
      throw sdk::DataError(file.string() + ": \"" + name + "\" has shape " + sdk::shape_of(it->second) +
                           ", the model's has " + sdk::shape_of(target));
    }
    target.detach().copy_(it->second);
  };
  for (const auto& item : module.named_parameters(/*recurse=*/true)) restore(item.key(), item.value());
  for (const auto& item : module.named_buffers(/*recurse=*/true)) restore(item.key(), item.value());
}

}  // namespace

TextGenerator::TextGenerator(const fs::path& run_dir, plugin::PluginLoader& loader) {
  const json config = read_config(run_dir);
  const fs::path config_file = run_dir / "config.json";
  const json& data = at_path(config, {"data", "train"}, config_file);
  const std::string dataset = at_path(data, {"dataset"}, config_file).get<std::string>();
  if (dataset != "text-char") {
    throw sdk::DataError(run_dir.string() + ": trained on dataset \"" + dataset +
                         "\", which has no character vocabulary; exogym-generate samples from runs on text-char data");
  }
  const fs::path text_file = at_path(data, {"path"}, config_file).get<std::string>();
  const std::string vocabulary = at_path(data, {"options", "vocabulary"}, config_file).get<std::string>();
  try {
    vocabulary_ = std::make_unique<data::CharVocabulary>(data::TextCharDataset::vocabulary_for(text_file, vocabulary));
  } catch (const sdk::DataError& e) {
    throw sdk::DataError(std::string("the run's vocabulary comes from its text file: ") + e.what());
  }

  const std::string plugin = at_path(config, {"model", "plugin"}, config_file).get<std::string>();
  try {
    plugin_ = loader.load("model", plugin, "model.plugin", run_dir);
    model_ =
        plugin_->create_model(plugin_->validate(at_path(config, {"model", "options"}, config_file), "model.options"));
  } catch (const sdk::ConfigError& e) {
    throw sdk::DataError(config_file.string() + ": " + e.what());
  }
  load_weights(model_->network(), run_dir / "model.pt");
  model_->network().eval();
}

TextGenerator::~TextGenerator() {
  model_.reset();  // before the plugin that holds its code
}

std::vector<int64_t> TextGenerator::encode_prompt(const std::string& prompt) const {
  std::string known;
  for (const char32_t c : vocabulary_->characters()) known += c == '\n' ? std::string("\\n") : data::utf8_encode(c);
  return vocabulary_->encode(prompt, "the prompt", "the run's vocabulary: \"" + known + "\"");
}

std::string TextGenerator::generate(const std::string& prompt, const SampleOptions& options,
                                    const std::function<void(const std::string&)>& on_text) {
  if (!(options.temperature >= 0)) throw sdk::Error("temperature must be >= 0");
  if (options.top_k < 0) throw sdk::Error("top-k must be >= 0");
  if (options.max_tokens < 0) throw sdk::Error("the token count must be >= 0");
  std::vector<int64_t> tokens = encode_prompt(prompt);
  // An empty prompt starts from EOS: the model has seen it as "the text
  // before this one ended".
  if (tokens.empty()) tokens.push_back(vocabulary_->eos());

  at::NoGradGuard no_grad;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  const int64_t vocab = vocabulary_->size();
  std::string produced;
  for (int64_t n = 0; n < options.max_tokens; ++n) {
    const at::Tensor context = at::from_blob(tokens.data(), {1, static_cast<int64_t>(tokens.size())}, at::kLong);
    at::Tensor logits = model_->next_token_logits(context).to(at::kCPU, at::kFloat).reshape({-1});
    if (logits.size(0) < vocab) {
      throw sdk::Error("the model predicts " + std::to_string(logits.size(0)) + " tokens, fewer than the " +
                       std::to_string(vocab) + " of the run's vocabulary");
    }
    logits = logits.narrow(0, 0, vocab);  // a larger model vocabulary has ids nothing decodes to
    int64_t next;
    if (options.temperature == 0) {
      next = at::argmax(logits).item<int64_t>();
    } else {
      logits = logits / options.temperature;
      if (options.top_k > 0 && options.top_k < vocab) {
        const double kth = std::get<0>(at::topk(logits, options.top_k)).min().item<double>();
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<double>::infinity());
      }
      next = at::multinomial(at::softmax(logits, 0), 1, /*replacement=*/false, generator).item<int64_t>();
    }
    if (next == vocabulary_->eos() && options.stop_at_eos) break;
    tokens.push_back(next);
    const std::string text = vocabulary_->token_text(next);
    produced += text;
    if (on_text) on_text(text);
  }
  return produced;
}

}  // namespace exogym::runtime::command
