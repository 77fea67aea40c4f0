#!/usr/bin/env bash
# clang-tidy (.clang-tidy) over the library's C++ files that differ from the merge base with main
# (origin/main where it exists), as `make lint` runs it. Needs a configured build dir (its
# compile_commands.json): without one it prints why it skips and succeeds, so a fresh clone can lint
# before it builds. The whole tree: `make tidy`.
set -euo pipefail
build_dir=${1:?usage: scripts/tidy-changed.sh BUILD_DIR}

if [ ! -f "$build_dir/compile_commands.json" ]; then
  echo "clang-tidy skipped: no $build_dir/compile_commands.json (make build writes it)"
  exit 0
fi
base=""
for ref in origin/main main; do
  if git rev-parse -q --verify "$ref^{commit}" >/dev/null; then
    base=$(git merge-base HEAD "$ref")
    break
  fi
done
if [ -z "$base" ]; then
  echo "clang-tidy skipped: neither origin/main nor main to compare with"
  exit 0
fi

# Library sources only, as `make tidy` (the tests' gtest macros trip bugprone-* checks), and only
# those the build dir knows (a file added since it was configured has no compile command yet).
files=()
while IFS= read -r f; do
  if grep -q "\"file\": \".*/$f\"" "$build_dir/compile_commands.json"; then files+=("$f"); fi
done < <(git diff --name-only --diff-filter=d "$base" -- 'src/*.cc' | grep -v '_test\.cc$' || true)
if [ ${#files[@]} -eq 0 ]; then
  echo "clang-tidy: no library .cc file changed since $(git rev-parse --short "$base")"
  exit 0
fi
echo "clang-tidy on ${#files[@]} file(s) changed since $(git rev-parse --short "$base"): ${files[*]}"
clang-tidy -p "$build_dir" --quiet --extra-arg=-Wno-unknown-warning-option "${files[@]}"
