#!/usr/bin/env bash
# ab_examples.sh OLD NEW [SEED]: the README main job (`python -m pytest examples`) of two commits, like for like:
# each tree exported with git archive to a fresh directory (no Hypothesis database), the same seed, serial, old
# then new; prints one line per tree with pytest's own summary. The installed entry points are bypassed so each
# tree runs its own plugins.
set -uo pipefail
old=${1:?usage: ab_examples.sh OLD NEW [SEED]} new=${2:?usage: ab_examples.sh OLD NEW [SEED]} seed=${3:-20261130}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
for ref in "$old" "$new"; do
  dir=$work/$ref && mkdir -p "$dir" && git -C "$repo" archive "$ref" | tar -x -C "$dir"
  plugins=(-p hypothesis.extra.pytestplugin -p pytest_benchmark.plugin -p pytest_gemmguard.plugin)
  [ -f "$dir/pytest_gemmguard/bench/plugin.py" ] && plugins+=(-p pytest_gemmguard.bench.plugin)
  start=$(date +%s.%N)
  (cd "$dir" && PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONPATH=$dir python -m pytest examples -q -p no:cacheprovider \
    "${plugins[@]}" --gemm-seed="$seed" >"$work/$ref.log" 2>&1)
  rc=$?
  printf '%s rc=%s wall=%.1f load=%s | %s\n' "$ref" "$rc" "$(echo "$(date +%s.%N) - $start" | bc)" \
    "$(cut -d' ' -f1 /proc/loadavg)" "$(grep -E '(passed|failed).* in ' "$work/$ref.log" | tail -1)"
done
echo "logs: $work"
