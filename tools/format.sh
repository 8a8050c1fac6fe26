#!/usr/bin/env bash
# Formats the tree the way CI checks it: `ruff format` (pyproject.toml's
# [tool.ruff]) for Python, clang-format (.clang-format) for the C++ of csrc/
# torch_openreg/include and third_party/openreg. CI (.ci/run) installs the versions it checks with:
# ruff 0.17.6 and clang-format 23.1.5 from PyPI.
#   tools/format.sh           rewrites files in place
#   tools/format.sh --check   changes nothing; fails and shows the difference
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t cpp < <(git ls-files 'csrc/*.h' 'csrc/*.cpp' 'torch_openreg/include/*.h' 'third_party/*.h' 'third_party/*.cpp' 'third_party/*.c')
if [[ "${1:-}" == "--check" ]]; then
  ruff format --check --diff .
  clang-format --dry-run --Werror "${cpp[@]}"
else
  ruff format .
  clang-format -i "${cpp[@]}"
fi
