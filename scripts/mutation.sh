#!/usr/bin/env bash
# Mutation testing (issue 26), run on purpose: never in CI or `npm test`.
#   npm run mutation                              every target, one after another
#   npm run mutation -- registry                  one target (registry, csimanager, reconciler)
#   npm run mutation -- reconciler --concurrency 1 --mutate 'packages/volumes/src/reconciler/mount-checker.ts'
# Arguments after the target names go to `stryker run` as they are. Each
# target's score is printed at the end of its run; its reports are in
# reports/mutation/<target>.html and .json (see stryker.config.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=()
while [[ $# -gt 0 && $1 != -* ]]; do
  targets+=("$1")
  shift
done
[[ ${#targets[@]} -gt 0 ]] || targets=(registry csimanager reconciler)

for target in "${targets[@]}"; do
  echo "== mutation: $target"
  MUTATION_TARGET=$target npx stryker run stryker.config.mjs "$@"
done
