#!/usr/bin/env bash
# gpu_session.sh PHASE: this session's H200 proofs in two back-to-back calls (the CuteDSL wheels travel in two
# halves, ../shared/tools/gpu-wheels; the machine stays warm only 30 s between calls).
#
#   a  (carry .gpu/a)                        stage the first half; the interleaved timing check (issue 13, alone
#                                            on the machine); then, side by side, the every-candidate GPU test
#                                            and the triton wrong-result finding with its candidates (issue 10)
#   b  (carry .gpu/b .gpu/cutlass_api_src)   install the CuteDSL set; the GPU job of .github/workflows/ci.yml
#                                            (scripts/gpu_job_local.sh, issue 12); then every ordered pair of
#                                            backends in one process (tests/test_backend_orders.py, issue 10)
#
# Logs go to $OUT; the last lines printed are a short table.
set -uo pipefail
cd "$(dirname "$0")/.."
phase=${1:?usage: gpu_session.sh a|b}
out=${OUT:-/tmp/gpu-session}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
plugins=(-p pytest_gemmguard.plugin -p pytest_gemmguard.bench.plugin -p no:cacheprovider)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u; } >"$out/env.txt" 2>&1

summary() {  # summary NAME FILE: one line, pytest's own last summary or the file's last line
  printf '%-22s %s\n' "$1" "$(grep -E '(passed|failed|skipped|error|no tests ran).* in ' "$2" | tail -1 || tail -1 "$2")"
}

case $phase in
a)
  mkdir -p /tmp/stage && cp .gpu/a/* /tmp/stage/
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_a .gpu/a/nvidia_cutlass-*.whl
  export PYTHONPATH=$PWD:/tmp/site_a
  timeout -k 5 150 python3 scripts/timing_check.py --device cuda --out /tmp/timing --shapes 256,1024,4096 \
    --rounds 8 --max-time 0.2 --rel-ci 0.002 --true-time 0.3 --true-reps 3 --no-agreement \
    --thresholds 0.01,0.02,0.05 --noise-threshold 0.02 --deadline 115 >"$out/timing.txt" 2>&1
  echo "rc=$?" >>"$out/timing.txt"
  (timeout -k 5 150 python3 -m pytest "${plugins[@]}" tests/gpu/test_gpu_candidates.py --gemm-backends=triton -v -rs \
    >"$out/gpu-candidates.txt" 2>&1; echo "rc=$?" >>"$out/gpu-candidates.txt") &
  timeout -k 5 150 python3 scripts/gpu_case.py triton \
    "GemmCase(op='mm', m=1, n=1, k=1, dtype='float32', layout='noncontiguous', seed=11)" \
    --variant base --variant GEMMGUARD_TRITON_TMA=0 >"$out/finding.txt" 2>&1
  timeout -k 5 100 python3 scripts/gpu_case.py triton \
    "GemmCase(op='mm', m=1, n=1, k=8, dtype='float32', layout='noncontiguous', seed=11)" >>"$out/finding.txt" 2>&1
  wait
  cat "$out/env.txt"
  tail -25 "$out/timing.txt"
  cut -c1-600 "$out/finding.txt"
  summary gpu-candidates "$out/gpu-candidates.txt"
  ;;
b)
  # shellcheck disable=SC1091
  source .gpu/b/install.sh || exit 3
  export PYTHONPATH=$PWD:/tmp/site_a:$PWD/.gpu/cutlass_api_src${PYTHONPATH:+:$PYTHONPATH}
  # The device copy of the tree may carry a stale .git: the job then commits this tree into a throwaway
  # repository, so its base is this tree (an A/A run of the whole job).
  [ -d .git ] && mv .git /tmp/stale-git
  OUT=/tmp/gpu-job-out timeout -k 10 280 bash scripts/gpu_job_local.sh >"$out/gpu-job.txt" 2>&1
  echo "rc=$?" >>"$out/gpu-job.txt"
  GEMMGUARD_ORDERS_CACHE=/tmp/gg-orders-cache timeout -k 5 "${ORDERS_S:-110}" python3 -m pytest "${plugins[@]}" \
    tests/test_backend_orders.py -v -rs -n 8 >"$out/orders.txt" 2>&1
  echo "rc=$?" >>"$out/orders.txt"
  cat "$out/env.txt"
  grep -E "^== gpu_job_local|verdict|exit status" "$out/gpu-job.txt" | tail -14
  sed -n '/job summary/,$p' "$out/gpu-job.txt" | head -30
  grep -E "PASSED|FAILED|SKIPPED|ERROR" "$out/orders.txt" | cut -c1-160 | tail -30
  summary orders "$out/orders.txt"
  ;;
*) echo "gpu_session.sh: phase must be a or b" >&2; exit 2 ;;
esac
