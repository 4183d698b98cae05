#include "lm_fixtures.h"

#include <fstream>

namespace fs = std::filesystem;
using nlohmann::json;

namespace exogym::test {

fs::path shakespeare() { return fs::path(EXOGYM_SOURCE_DIR) / "examples" / "data" / "shakespeare" / "input.txt"; }

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
}

json text_manifest(int nodes, int64_t steps) {
  const std::string text = shakespeare().string();
  return {
      {"name", "lm"},
      {"seed", 5},
      {"nodes", nodes},
      {"threads", 1},
      {"model",
       {{"plugin", "nanogpt"}, {"options", {{"n_layer", 1}, {"n_head", 2}, {"n_embd", 32}, {"block_size", 16}}}}},
      {"strategy", {{"plugin", "allreduce"}, {"options", {{"optimizer", {{"name", "adamw"}, {"lr", 3e-3}}}}}}},
      {"data",
       {{"train", {{"dataset", "text-char"}, {"path", text}, {"options", {{"block_size", 16}}}}},
        {"val", {{"dataset", "text-char"}, {"path", text}, {"split", "val"}, {"options", {{"block_size", 16}}}}}}},
      {"train", {{"max_steps", steps}, {"batch_size", 8}}},
      {"eval", {{"interval", 0}, {"size", 64}}},
      {"output", {{"dir", "out"}}},
  };
}

}  // namespace exogym::test
