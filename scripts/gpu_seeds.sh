#!/usr/bin/env bash
# A user's own project on unchanged libraries, over fresh seeds: scripts/speed_user_tests.py copied into an empty
# directory outside this repository (nothing configured: gemmguard's shipped known failures only), run once per
# seed and backend at the default budget. A clean library must give no red. Prints one row per run, then a table.
#
#   bash scripts/gpu_seeds.sh "aten:101 102 103" "triton:201 202"      # BACKEND:SEEDS ...
#
# Logs go to $OUT (or ./gpu-seeds-out). RUN_S bounds each run (default 300 s); STOP_AT (epoch seconds) stops
# starting new runs after that time and cuts a running one there, so a device call's time limit is never hit.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$PWD/gpu-seeds-out}
mkdir -p "$out"
project=$(mktemp -d)
cp "$repo/scripts/speed_user_tests.py" "$project/test_user_gemms.py"
plugins=()
python3 -c 'import importlib.metadata as m, sys; sys.exit(not any(e.value == "pytest_gemmguard.plugin" for e in m.entry_points(group="pytest11")))' \
  || plugins=(-p pytest_gemmguard.plugin -p pytest_gemmguard.bench.plugin)
rows=()
for spec in "$@"; do
  backend=${spec%%:*}
  for seed in ${spec#*:}; do
    if [ -n "${STOP_AT:-}" ] && [ "$(date +%s)" -ge "$STOP_AT" ]; then rows+=("$backend $seed not-run (time)"); continue; fi
    log="$out/$backend-seed$seed.txt"
    start=$(date +%s)
    limit=${RUN_S:-300}  # and never past STOP_AT: a run started late is cut there, not at the device's own limit
    if [ -n "${STOP_AT:-}" ] && [ $((STOP_AT - start)) -lt "$limit" ]; then limit=$((STOP_AT - start)); fi
    (cd "$project" && PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" timeout -k 5 "$limit" \
      python3 -m pytest "${plugins[@]}" -p no:cacheprovider -rfExX test_user_gemms.py \
      --gemm-backends="$backend" --gemm-seed="$seed") > "$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    summary=$(grep -E "^=+ .*(passed|failed|error).* in " "$log" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
    rows+=("$backend $seed rc=$rc ${took}s $summary")
    echo "gpu_seeds: $backend seed $seed rc=$rc ${took}s $summary"
    grep -E "^(FAILED|XFAIL|XPASS)" "$log" | cut -c1-300
  done
done
echo "== gpu_seeds: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1); $(python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' 2>/dev/null)"
printf '%s\n' "${rows[@]}"
