#!/usr/bin/env bash
# The GPU job's install step (and scripts/gpu_job_local.sh's): gemmguard into a venv that sees the runner's
# own CUDA build of torch. Nothing here installs torch: on a GPU runner that is the machine's business, and a
# torch pulled by pip could be a build for another CUDA (or none).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/gemmguard-venv"
python3 -c 'import sys, torch; torch.cuda.is_available() or sys.exit(f"gemmguard: torch {torch.__version__} on this runner sees no CUDA device")' \
  || { echo "::error title=gemmguard: no CUDA torch::install a CUDA build of torch for python3 on this runner"; exit 1; }
python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -e '.[gpu]'
# Later steps of a workflow find this venv's python first.
if [ -n "${GITHUB_PATH:-}" ]; then echo "$venv/bin" >>"$GITHUB_PATH"; fi
echo "gemmguard: installed into $venv"
