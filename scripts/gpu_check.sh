#!/usr/bin/env bash
# gpu_check.sh PHASE: prove the GPU paths on a GPU machine in two calls, because the CuteDSL wheel set
# travels in two halves (../shared/tools/gpu-wheels):
#
#   a  (carry .gpu/a)                      stage the first half; the GPU suite (tests/gpu) on aten, triton and
#                                          cutlass, the example suite on aten, and the oracle calibration
#   b  (carry .gpu/b .gpu/cutlass_api_src) install the CuteDSL set; the GPU suite on cutedsl and cutedsl[quack],
#                                          and the example suite on cutedsl
#
# Every job runs in its own process (own Inductor cache) in parallel; logs and junit files go to $OUT, and
# the last lines printed are one summary line per job.
set -uo pipefail
cd "$(dirname "$0")/.."
phase=${1:?usage: gpu_check.sh a|b}
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
plugins=(-p pytest_gemmguard.plugin -p pytest_gemmguard.bench.plugin -p no:cacheprovider)

job() {  # job NAME SECONDS COMMAND...: run in the background, log to $out/NAME.txt, end with rc=
  local name=$1 limit=$2
  shift 2
  (timeout -s INT -k 20 "$limit" "$@" >"$out/$name.txt" 2>&1; echo "rc=$?" >>"$out/$name.txt") &
}

case $phase in
a)
  mkdir -p /tmp/stage && cp .gpu/a/* /tmp/stage/
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_a .gpu/a/nvidia_cutlass-*.whl
  export PYTHONPATH=$PWD:/tmp/site_a
  job calibrate 420 python3 scripts/gpu_calibrate.py --cases 3000 --seeds 6 --compiled 400 --deadline 390 --out "$out"
  job examples-aten 480 python3 -m pytest "${plugins[@]}" examples --gemm-backends=aten -q -rs --junitxml="$out/examples-aten.xml"
  for b in aten triton cutlass; do
    job "gpu-$b" 480 python3 -m pytest "${plugins[@]}" tests/gpu --gemm-backends=$b -q -rs --junitxml="$out/gpu-$b.xml"
  done
  ;;
b)
  # shellcheck disable=SC1091
  source .gpu/b/install.sh || exit 3
  export PYTHONPATH=$PWD:/tmp/site_a:$PWD/.gpu/cutlass_api_src${PYTHONPATH:+:$PYTHONPATH}
  for b in cutedsl "cutedsl[quack]"; do
    job "gpu-${b//[^a-z]/_}" 480 python3 -m pytest "${plugins[@]}" tests/gpu --gemm-backends="$b" -q -rs \
      --junitxml="$out/gpu-${b//[^a-z]/_}.xml"
  done
  job examples-cutedsl 480 python3 -m pytest "${plugins[@]}" examples --gemm-backends=cutedsl -q -rs \
    --gemm-max-examples=10 --junitxml="$out/examples-cutedsl.xml"
  ;;
*) echo "gpu_check.sh: phase must be a or b" >&2; exit 2 ;;
esac
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u; } >"$out/env.txt" 2>&1
wait
cat "$out/env.txt"
for f in "$out"/*.txt; do
  [ "$(basename "$f")" = env.txt ] && continue
  printf '%-24s %s | %s\n' "$(basename "$f" .txt)" "$(grep -E '(passed|failed|skipped|error|no tests ran).* in ' "$f" | tail -1)" "$(tail -1 "$f")"
done
grep -E '^(TOTAL|#)' "$out/calibrate.txt" 2>/dev/null
