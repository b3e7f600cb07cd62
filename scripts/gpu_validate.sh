#!/usr/bin/env bash
# gpu_validate.sh: prove gemmguard's GPU backends on a GPU machine and write docs/gpu-validation.md.
#
#   scripts/gpu_validate.sh [--install readme|staged|none] [--backends aten,triton,cutlass,cutedsl]
#                           [--results DIR] [--merge DIR ...] [--examples N] [--pytest-timeout S]
#                           [--bench-timeout S] [--doc PATH]
#
# First the packages, by --install:
#   readme  (the default) README's "GPU install" lines, exactly and in order (install_steps below; the test
#           tests/test_gpu_install.py fails if they differ from the README's), stopping at the first failure;
#   staged  the device machine, which has no package index: the wheels that travel with the repo (below);
#           the default where .gpu/ exists;
#   none    the machine is set up already.
# Whatever was installed, the pytest header then says which backends are unavailable and the fix for each.
#
# For each backend, in parallel (one process each, own Inductor cache): pytest over examples/ and
# tests/gpu/ with --gemm-backends=<backend>, junit XML and a JSON log of the kernels each GPU test saw.
# Then, serially (clean timings): scripts/gpu_bench.py, cold compile seconds and TFLOP/s per backend.
# Finally scripts/gpu_report.py merges this run's DIR with any --merge DIRs into the results doc.
#
# Packages the GPU machine lacks travel with the repo (see ../shared/tools/gpu-wheels):
#   .gpu/b/install.sh   the CuteDSL/CUTLASS wheels, staged by an earlier run that carried .gpu/a
#   .gpu/a/*.whl        nvidia-cutlass alone (enough for the cutlass backend), installed to /tmp/site_a
#   .gpu/cutlass_api_src  NVIDIA/cutlass python/cutlass_api (NVGEMM on torch 2.11-2.13), put on PYTHONPATH
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

backends=aten,triton,cutlass,cutedsl
results=${OUT:-$repo/gpu-results}/run
examples=2
examples_cutlass=1  # each CUTLASS compile builds with nvcc
pytest_timeout=300
bench_timeout=240
doc=docs/gpu-validation.md
merge=()
install=readme
[ -d .gpu ] && install=staged
while [ $# -gt 0 ]; do
  case $1 in
  --install) install=$2; shift 2 ;;
  --backends) backends=$2; shift 2 ;;
  --results) results=$2; shift 2 ;;
  --merge) merge+=("$2"); shift 2 ;;
  --examples) examples=$2; shift 2 ;;
  --examples-cutlass) examples_cutlass=$2; shift 2 ;;
  --pytest-timeout) pytest_timeout=$2; shift 2 ;;
  --bench-timeout) bench_timeout=$2; shift 2 ;;
  --doc) doc=$2; shift 2 ;;
  *) echo "unknown argument $1"; exit 2 ;;
  esac
done
case $install in readme | staged | none) ;; *) echo "--install must be readme, staged or none"; exit 2 ;; esac
mkdir -p "$results"
export PYTHONUNBUFFERED=1

# ---- packages
install_steps() { # README.md, "GPU install", verbatim: one command a line
  cat <<'STEPS'
nvidia-smi
python3 -c "import sys, torch; sys.exit(not torch.cuda.is_available())" || python3 -m pip install torch==2.13.0+cu130 --index-url https://download.pytorch.org/whl/cu130
python3 -m pip install -e '.[gpu,cutlass,cutedsl]'
python3 -c "import sys, torch; sys.exit(tuple(map(int, torch.__version__.split('.')[:2])) < (2, 14))" || python3 -m pip install 'cutlass_api @ git+https://github.com/NVIDIA/cutlass@cutlass_api#subdirectory=python/cutlass_api'
python3 -m pytest -p no:cacheprovider --collect-only -q examples
STEPS
}
echo "gpu_validate: install: $install"
if [ "$install" = readme ]; then
  while IFS= read -r step; do
    echo "gpu_validate: install step: $step"
    bash -o pipefail -c "$step" || { echo "gpu_validate: install step failed (exit $?): $step"; exit 3; }
  done < <(install_steps)
fi
if [ "$install" = staged ] && [ -f .gpu/b/install.sh ]; then
  # shellcheck disable=SC1091
  source .gpu/b/install.sh || echo "gpu_validate: .gpu/b/install.sh failed (CuteDSL wheels missing)"
fi
if [ "$install" = staged ] && ! python3 -c "import cutlass_library" 2>/dev/null && ls .gpu/a/nvidia_cutlass-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_a .gpu/a/nvidia_cutlass-*.whl
fi
[ -d /tmp/site_a ] && export PYTHONPATH=/tmp/site_a${PYTHONPATH:+:$PYTHONPATH}
[ "$install" = staged ] && [ -d .gpu/cutlass_api_src ] && export PYTHONPATH=$repo/.gpu/cutlass_api_src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH}
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
# The plugin loads from the tree unless it is installed (then its entry point loads it).
plugin=(-p pytest_gemmguard.plugin -p pytest_gemmguard.bench.plugin)
python3 -c "import importlib.metadata as m, sys; sys.exit(0 if any(e.name == 'gemmguard' for e in m.entry_points(group='pytest11')) else 1)" && plugin=()

# ---- environment
python3 - "$results/env.json" <<'EOF'
import json, subprocess, sys, datetime, importlib.metadata as md, importlib.util
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as exc:
        return f"? ({exc})"
def ver(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None
import torch, triton
env = {
    "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    "gpu": sh("nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader"),
    "capability": ".".join(map(str, torch.cuda.get_device_capability())),
    "python": sys.version.split()[0],
    "torch": torch.__version__, "torch_cuda": torch.version.cuda, "triton": triton.__version__,
    "nvcc": sh("nvcc --version | tail -2 | head -1"),
    "nvidia-cutlass": ver("nvidia-cutlass"), "nvidia-cutlass-dsl": ver("nvidia-cutlass-dsl"),
    "cutlass_api": "present" if importlib.util.find_spec("cutlass_api") else None,
    "quack-kernels": ver("quack-kernels"), "nvidia-cutlass-operators": ver("nvidia-cutlass-operators"),
    "pytest": ver("pytest"), "hypothesis": ver("hypothesis"),
}
json.dump(env, open(sys.argv[1], "w"), indent=1)
print(json.dumps(env))
EOF

# ---- pytest, one process per backend, in parallel
IFS=, read -r -a names <<<"$backends"
pids=()
# File names: cutedsl[quack] -> cutedsl-quack (brackets are not safe in every place results travel).
safe() { echo "$1" | sed 's/\[/-/g; s/\]//g'; }
for b in "${names[@]}"; do
  f=$(safe "$b")
  (
    start=$(date +%s)
    n=$examples
    [ "$b" = cutlass ] && n=$examples_cutlass
    GEMMGUARD_GPU_LOG=$results/gpu-log-$f.jsonl timeout -s INT -k 30 "$pytest_timeout" \
      python3 -m pytest "${plugin[@]}" examples tests/gpu -p no:cacheprovider -q -rs \
      --gemm-backends="$b" --gemm-max-examples="$n" --gemm-seed=20261129 \
      --gemm-cache-dir="/tmp/gg-cache-$f" --gemm-compile-timeout=240 \
      --junitxml="$results/junit-$f.xml" >"$results/pytest-$f.log" 2>&1
    echo "{\"backend\": \"$b\", \"rc\": $?, \"wall_s\": $(($(date +%s) - start))}" >"$results/pytest-$f.rc.json"
  ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for b in "${names[@]}"; do
  f=$(safe "$b")
  echo "== pytest $b: $(cat "$results/pytest-$f.rc.json")"
  grep -E "passed|failed|error" "$results/pytest-$f.log" | tail -1
done

# ---- bench, serially
timeout -s INT -k 20 "$bench_timeout" python3 scripts/gpu_bench.py "$results/bench.jsonl" "${names[@]}" \
  >"$results/bench.log" 2>&1
echo "== bench rc $?"

# ---- report
mkdir -p "$(dirname "$doc")"
python3 scripts/gpu_report.py --doc "$doc" "${merge[@]}" "$results"
if [ -n "${OUT:-}" ]; then
  tar -czf "$OUT/results-$(safe "$backends" | tr , -).tar.gz" -C "$(dirname "$results")" "$(basename "$results")"
  cp "$doc" "$OUT/"
fi
