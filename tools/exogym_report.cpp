// exogym-report: one report.html for any run folders together (different
// manifests, days, machines), the same page exogym-run writes.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/tool.h"
#include "exogym/runtime/output/report/finished_run.h"
#include "exogym/runtime/output/report/report.h"

int main(int argc, char** argv) {
  namespace report = exogym::runtime::output::report;
  exogym::tools::Tool tool("exogym-report",
                           "Writes one HTML report for the given runs, e.g.\n"
                           "  exogym-report runs/mnist-compare runs/last-week/diloco -o compare.html\n"
                           "A comparison's folder stands for its variants. Folders that are not runs are left out "
                           "(exit status 2, after writing the report of the others).");
  std::vector<std::string> folders;
  std::string output = "report.html", title;
  CLI::App& app = tool.app();
  app.add_option("runs", folders, "run folders, or comparison folders holding them")
      ->required()
      ->type_name("RUN_FOLDER...");
  app.add_option("-o,--output", output, "the HTML file to write (replaced if it exists)")
      ->capture_default_str()
      ->type_name("FILE");
  app.add_option("--title", title, "the page's title (default: the folders' names)")->type_name("TEXT");
  return tool.run(argc, argv, [&] {
    auto log = tool.make_logger();
    const auto runs = report::expand_run_folders({folders.begin(), folders.end()});
    if (title.empty()) {  // the folders as given: a comparison's name, not its variants'
      for (const auto& folder : folders) {
        title += (title.empty() ? "" : ", ") + report::folder_path(folder).filename().string();
      }
      if (title.size() > 80) title = title.substr(0, 77) + "...";
    }
    const auto outcome = report::write_report(runs, output, title);
    for (const auto& note : outcome.notes) log->warn("{}", note);
    if (!tool.log_options().quiet) {
      std::printf("%s: %zu run%s\n", output.c_str(), outcome.shown.size(), outcome.shown.size() == 1 ? "" : "s");
    }
    return outcome.shown.size() == runs.size() ? 0 : exogym::tools::kUsageError;
  });
}
