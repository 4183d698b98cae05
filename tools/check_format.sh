#!/bin/sh
# Every tracked .cpp and .h follows the repository's .clang-format; `tools/dev
# format` fixes what this reports. Formatting differs between clang-format
# releases, so the check runs only with the release the sources were
# formatted with (Debian 12's, 14) and is skipped (77) with another or none.
root=${1:?usage: check_format.sh SOURCE_DIR}
cd "$root" || exit 2
wanted=14
if ! command -v clang-format >/dev/null 2>&1; then
  echo "clang-format is not installed (apt-get install clang-format): skipped"
  exit 77
fi
major=$(clang-format --version | sed -n 's/.*version \([0-9][0-9]*\).*/\1/p')
if [ "$major" != "$wanted" ]; then
  echo "clang-format $major is not release $wanted, which the sources are formatted with: skipped"
  exit 77
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files '*.cpp' '*.h')
else
  files=$(find sdk runtime plugins models tools tests examples -name '*.cpp' -o -name '*.h')
fi
# --Werror turns each formatting difference into an error naming file and line.
echo "$files" | xargs clang-format --dry-run --Werror || {
  echo "run tools/dev format (clang-format -i) on the files above"
  exit 1
}
echo "$(echo "$files" | wc -l) files follow .clang-format"
