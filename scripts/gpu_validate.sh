#!/usr/bin/env bash
# gpu_validate.sh: gemmguard's GPU validation, in named steps. Each step measures what one page of
# docs/validation/ records (docs/validation/index.md says which); rerun a step, then update its page.
#
#   scripts/gpu_validate.sh [--install readme|staged|none] STEP [STEP ...]
#
# Steps, run in the order given:
#   install       the packages, by --install:
#                   readme  README's "GPU install" lines, exactly and in order (install_steps below;
#                           tests/test_gpu_install.py fails if they differ from the README's), stopping at the
#                           first that fails; the default where there is no .gpu/
#                   staged  a machine without a package index: the wheels carried in .gpu/ (.gpu/a in one call,
#                           then .gpu/b and .gpu/cutlass_api_src in the next, while the machine keeps /tmp);
#                           the default where .gpu/ exists
#                   none    the machine is set up already
#   suites        tests/gpu on each backend, one process each, side by side; the examples on aten and cutedsl
#   calibrate     the oracle on unchanged libraries (scripts/gpu_calibrate.py, shards side by side): aten's
#                 static compiles and triton's dynamic ones; CALIBRATE="aten triton-dynamic triton-static" picks
#   calibrate-fn  the bound of check(fn) on the functions users write (scripts/calibrate_fn_bound.py)
#   seeds         a user's own project over fresh seeds, aten and triton (scripts/gpu_seeds.sh); SEED=N reruns
#   orders        every ordered pair of backends in one process (tests/test_backend_orders.py)
#   examples      README's main job with every extra: python -m pytest examples -v --durations=0 --gemm-seed=${SEED:-1};
#                 SEEDS="S1 S2" runs one such process per seed, side by side; EXAMPLES_K="EXPR" passes -k EXPR (a
#                 test's draws depend on the seed and the test alone, so a job split by -k over device calls that
#                 each allow 10 minutes checks what one process would)
#   big           the big profile (one tensor past 2**31 elements): the examples' drawn tests on aten and triton
#                 (BIG_BACKENDS), --gemm-profile=big --gemm-seed=${SEED:-1}
#   rates         verified cases per minute: the triton user file, cutedsl's file (seed 11, default budget)
#   workers       the triton user file at three splits of the cores (workers x compile threads)
#   job           the workflow's GPU job (scripts/gpu_job_local.sh), narrowed as recorded
#   bench         the benchmark verdict's false alarms and detection limits (scripts/timing_check.py)
#   kernels       gemmguard's own kernels against cuBLAS (scripts/gpu_bench_kernels.py, check_cute.py --optin)
#   kernel-tests  tests/test_kernels.py; the CuteDSL kernel's disk cache and SM80-class path
#   multi         one pytest-xdist worker per GPU (scripts/gpu_multi.sh)
#
# Logs go to $OUT (default /tmp/gpu-validate): STEP*.txt and env.txt (the card, driver, versions, commit and a hash of
# the package's files: `find pytest_gemmguard -name '*.py' | LC_ALL=C sort | xargs cat | sha256sum` here says which).
# The last lines printed are one summary per step. STEP_S bounds each command of a step (seconds, default 3000).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
steps_known="install suites calibrate calibrate-fn seeds orders examples big rates workers job bench kernels kernel-tests multi"
usage() { sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; }

install=readme
[ -d .gpu ] && install=staged
steps=()
while [ $# -gt 0 ]; do
  case $1 in
  --install) install=${2:-}; shift 2 || shift ;;
  -h | --help) usage; exit 0 ;;
  -*) echo "gpu_validate: unknown option $1 (see --help)" >&2; exit 2 ;;
  *) steps+=("$1"); shift ;;
  esac
done
case $install in readme | staged | none) ;; *) echo "gpu_validate: --install must be readme, staged or none" >&2; exit 2 ;; esac
[ ${#steps[@]} -gt 0 ] || { echo "gpu_validate: name at least one step: $steps_known" >&2; exit 2; }
for s in "${steps[@]}"; do
  [[ " $steps_known " == *" $s "* ]] || { echo "gpu_validate: no step '$s' (steps: $steps_known)" >&2; exit 2; }
done
out=${OUT:-/tmp/gpu-validate}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
base_pythonpath=${PYTHONPATH:-}

t() { timeout -k 10 "${STEP_S:-3000}" "$@"; }

install_steps() { # README.md, "GPU install", verbatim: one command a line
  cat <<'STEPS'
nvidia-smi
python3 -c "import sys, torch; sys.exit(not torch.cuda.is_available())" || python3 -m pip install torch==2.13.0+cu130 --index-url https://download.pytorch.org/whl/cu130
python3 -m pip install -e '.[gpu,cutlass,cutedsl]'
python3 -c "import sys, torch; sys.exit(tuple(map(int, torch.__version__.split('.')[:2])) < (2, 14))" || python3 -m pip install 'cutlass_api @ git+https://github.com/NVIDIA/cutlass@cutlass_api#subdirectory=python/cutlass_api'
python3 -m pytest -p no:cacheprovider --collect-only -q examples
STEPS
}

# Where a staged install put its packages (an earlier call on the same machine may have), and the tree itself.
paths() {
  local p=$repo
  [ -d .gpu/cutlass_api_src ] && p=$p:$repo/.gpu/cutlass_api_src
  [ -d /tmp/site/nvidia_cutlass_dsl ] && p=$p:/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages && PATH=/tmp/site/bin:$PATH
  [ -d /tmp/site_a ] && p=$p:/tmp/site_a
  export PYTHONPATH=$p${base_pythonpath:+:$base_pythonpath} PATH
  # Both plugins by name, unless an installed entry point loads one already (twice would be an error).
  plugins=(-p no:cacheprovider)
  local plugin
  for plugin in pytest_gemmguard.plugin pytest_gemmguard.bench.plugin; do
    python3 -c "import importlib.metadata as m, sys; sys.exit(not any(e.value == sys.argv[1] for e in m.entry_points(group='pytest11')))" \
      "$plugin" || plugins+=(-p "$plugin")
  done
}

record_env() {
  python3 - >"$out/env.txt" 2>&1 <<'EOF'
import datetime, importlib.metadata as md, importlib.util, subprocess, sys
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as exc:
        return f"? ({exc})"
def ver(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "-"
import torch
try:
    import triton
    triton_version = triton.__version__
except ImportError:
    triton_version = "-"
print("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
print("gpu", sh("nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader"))
print("cores", len(__import__("os").sched_getaffinity(0)))
print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton_version)
print("nvcc", sh("nvcc --version | tail -2 | head -1") or "-")
for dist in ("nvidia-cutlass", "nvidia-cutlass-dsl", "quack-kernels", "nvidia-cutlass-operators", "hypothesis"):
    print(dist, ver(dist))
print("cutlass_api", "present" if importlib.util.find_spec("cutlass_api") else "-")
print("gemmguard", sh("git rev-parse --short HEAD 2>/dev/null") or "(no git)", sh("git status --porcelain -uno | head -1") and "(changed)")
# What ran, whatever the copy's git says (a device machine's copy may carry an older .git): the package's files.
print("gemmguard files", sh("find pytest_gemmguard -name '*.py' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12"))
EOF
}

# sample FILE: CPU, GPU and memory use every 5 s, until killed
sample() {
  while :; do
    echo "$(date +%s) $(head -1 /proc/stat) gpu=$(nvidia-smi --query-gpu=utilization.gpu,memory.used \
      --format=csv,noheader,nounits | tr -d ' ') $(grep -E '^Mem(Total|Available):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
    sleep 5
  done >"$1"
}

# logged LOG COMMAND...: the command (bounded by STEP_S) with its output in LOG, its exit status appended as rc=N
# and returned
logged() {
  local log=$1 rc
  shift
  t "$@" >"$log" 2>&1
  rc=$?
  echo "rc=$rc" >>"$log"
  return $rc
}

# ---- the steps (each returns 0 only when every command in it did)

step_install() {
  echo "gpu_validate: install: $install"
  case $install in
  readme)
    while IFS= read -r step; do
      echo "gpu_validate: install step: $step"
      bash -o pipefail -c "$step" || { echo "gpu_validate: install step failed (exit $?): $step"; return 3; }
    done < <(install_steps)
    ;;
  staged)
    if ls .gpu/a/* >/dev/null 2>&1; then mkdir -p /tmp/stage && cp .gpu/a/* /tmp/stage/; fi
    if ls .gpu/a/nvidia_cutlass-*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_a .gpu/a/nvidia_cutlass-*.whl || return 3
    fi
    # shellcheck disable=SC1091
    if [ -f .gpu/b/install.sh ]; then source .gpu/b/install.sh || return 3; fi
    ;;
  esac
  paths
  python3 -m pytest "${plugins[@]}" --collect-only -q examples | grep -E "^gemmguard"
}

step_suites() {
  local b f backends pids=() rc=0
  IFS=, read -r -a backends <<<"${SUITES_BACKENDS:-aten,triton,cutlass,cutedsl,cutedsl[quack]}"
  for b in "${backends[@]}"; do
    f=${b//[^a-z]/_}
    GEMMGUARD_GPU_LOG=$out/suites-$f.jsonl logged "$out/suites-$f.txt" python3 -m pytest "${plugins[@]}" tests/gpu \
      --gemm-backends="$b" -q -rs --junitxml="$out/suites-$f.xml" &
    pids+=($!)
  done
  logged "$out/suites-examples-aten.txt" python3 -m pytest "${plugins[@]}" examples --gemm-backends=aten -q -rs &
  pids+=($!)
  logged "$out/suites-examples-cutedsl.txt" python3 -m pytest "${plugins[@]}" examples --gemm-backends=cutedsl \
    --gemm-max-examples=10 -q -rs &
  pids+=($!)
  for b in "${pids[@]}"; do wait "$b" || rc=1; done
  return $rc
}

step_calibrate() {
  # 14 shards on 16 cores: each Inductor's compile pool of its own would start 16 more processes.
  export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-1}
  local what shards deadline i args=() pids=() rc=0
  for what in ${CALIBRATE:-aten triton-dynamic}; do
    case $what in
    aten) args=(--backend aten --cases 2400 --seeds 8 --seed-base "${ATEN_SEED_BASE:-3000}") shards=4 deadline=240 ;;
    triton-dynamic) args=(--backend triton --dynamic --per-structure 20 --cases 4000 --seeds 20
      --seed-base "${TRITON_SEED_BASE:-7200}") shards=10 deadline=380 ;;
    triton-static) args=(--backend triton --cases 2000 --seeds 10 --seed-base "${TRITON_STATIC_SEED_BASE:-5000}")
      shards=10 deadline=250 ;;
    *) echo "gpu_validate: CALIBRATE takes aten, triton-dynamic, triton-static, not $what"; return 2 ;;
    esac
    for ((i = 0; i < shards; i++)); do
      logged "$out/calibrate-$what-shard$i.log" python3 scripts/gpu_calibrate.py "${args[@]}" --compiled 100000 \
        --shard "$i/$shards" --deadline "$deadline" --out "$out/calibrate-$what" &
      pids+=($!)
    done
  done
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  for what in ${CALIBRATE:-aten triton-dynamic}; do
    logged "$out/calibrate-$what.txt" python3 scripts/gpu_calibrate.py --merge --backend "${what%%-*}" \
      --out "$out/calibrate-$what" || rc=1
    grep -E "^(TOTAL|TIME)" "$out/calibrate-$what.txt"
    grep "^OVER" "$out/calibrate-$what.txt" | cut -c1-200 | head -12
  done
  return $rc
}

step_calibrate_fn() {
  t python3 scripts/calibrate_fn_bound.py --device cuda --cases "${FN_CASES:-50}" --backends aten triton \
    --out "$out/calibrate-fn.jsonl"
}

step_seeds() {
  local s=${SEED:-$(date +%s)}
  OUT=$out/seeds t bash scripts/gpu_seeds.sh "aten:$s $((s + 1)) $((s + 2))" "triton:$s $((s + 1)) $((s + 2))"
}

step_orders() {
  GEMMGUARD_ORDERS_CACHE=$(mktemp -d) t python3 -m pytest "${plugins[@]}" tests/test_backend_orders.py -v -rs -n 8
}

step_examples() {
  sample "$out/examples-use.txt" &
  local sampler=$! start=$SECONDS rc=0 seed pid pids=()
  if [ -z "${SEEDS:-}" ]; then
    # shellcheck disable=SC2086  # EXAMPLES_ARGS: more options, split on spaces
    t python3 -m pytest "${plugins[@]}" examples -v --durations=0 --gemm-seed="${SEED:-1}" ${EXAMPLES_ARGS:-} \
      ${EXAMPLES_K:+-k "$EXAMPLES_K"}
    rc=$?
  else
    # Several seeds side by side, one process each (its log examples-SEED.txt): verdicts as in a run alone, wall
    # times not comparable with one. Give each fewer compile-ahead workers in EXAMPLES_ARGS, or they share the cores.
    for seed in $SEEDS; do
      # shellcheck disable=SC2086
      logged "$out/examples-$seed.txt" python3 -m pytest "${plugins[@]}" examples -v --durations=0 \
        --gemm-seed="$seed" ${EXAMPLES_ARGS:-} ${EXAMPLES_K:+-k "$EXAMPLES_K"} &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
    for seed in $SEEDS; do
      grep -HE '(passed|failed|error).* in [0-9.]+s|^FAILED' "$out/examples-$seed.txt" | cut -c1-200
    done
  fi
  kill "$sampler" 2>/dev/null
  echo "rc=$rc, $((SECONDS - start)) s as a process"
  return $rc
}

step_big() {
  local start=$SECONDS rc
  t python3 -m pytest "${plugins[@]}" examples -v -rs --gemm-profile=big --gemm-seed="${SEED:-1}" \
    --gemm-backends="${BIG_BACKENDS:-aten,triton}" -k "test_any_gemm or test_linear_layers"
  rc=$?
  echo "rc=$rc, $((SECONDS - start)) s as a process"
  return $rc
}

step_rates() {
  local rc=0
  logged "$out/rates-triton.txt" python3 -m pytest "${plugins[@]}" scripts/speed_user_tests.py --gemm-backends=triton \
    --gemm-seed=11 -v || rc=1
  logged "$out/rates-cutedsl.txt" python3 -m pytest "${plugins[@]}" scripts/speed_cutedsl_tests.py \
    --gemm-backends=cutedsl --gemm-seed=11 -v || rc=1
  grep -hE "^(triton|cutedsl) |in examples" "$out"/rates-*.txt | cut -c1-160
  return $rc
}

step_workers() {
  local split log rc=0
  sample "$out/workers-use.txt" &
  local sampler=$!
  for split in ${WORKER_SPLITS:-14x2 7x2 14x1}; do  # workers x Inductor compile threads per worker
    log=$out/workers-$split.txt
    TORCHINDUCTOR_COMPILE_THREADS=${split#*x} logged "$log" python3 -m pytest "${plugins[@]}" \
      scripts/speed_user_tests.py --gemm-backends=triton --gemm-seed=11 --gemm-compile-workers="${split%x*}" -v || rc=1
    echo "== $split: $(grep -E "in examples" "$log" | tail -1 | cut -c1-140)"
  done
  kill "$sampler" 2>/dev/null
  return $rc
}

step_job() {
  # The narrowing the recorded run used (one device call); set a variable empty for the workflow's own value.
  export GEMMGUARD_GPU_TESTS=${GEMMGUARD_GPU_TESTS-examples tests/gpu/test_backend_logic.py}
  export GEMMGUARD_GPU_BENCH_ARGS=${GEMMGUARD_GPU_BENCH_ARGS---gemm-cold-compile=off --gemm-bench-time=0.5 -k test_large}
  mkdir -p "$out/job"
  OUT=$out/job t bash scripts/gpu_job_local.sh ${JOB_BASE:+--base "$JOB_BASE"}
}

step_bench() {
  t python3 scripts/timing_check.py --device cuda --out "$out/bench" --shapes 256,1024,4096 --rounds 8 --max-time 0.2 \
    --rel-ci 0.002 --true-time 0.3 --true-reps 3 --no-agreement --thresholds 0.01,0.02,0.05 --noise-threshold 0.02 \
    --deadline 115
}

step_kernels() {
  local rc=0
  logged "$out/kernels-bench.txt" python3 -m pytest "${plugins[@]}" -s scripts/gpu_bench_kernels.py \
    --gemm-allow-unavailable --gemm-backends='aten,triton,triton[kernels],cutedsl[quack],cutedsl[kernels]' || rc=1
  mkdir -p "$out/kernels-optin"
  OUT=$out/kernels-optin CHECK_CUTE_BUDGET_S=150 logged "$out/kernels-optin.txt" python3 scripts/check_cute.py --optin \
    || rc=1
  grep -h "^KERNELS" "$out/kernels-bench.txt"
  grep -hE "correctness|BAD|ERR" "$out/kernels-optin.txt" | cut -c1-200 | head -8
  return $rc
}

step_kernel_tests() {
  local cache pass rc=0
  logged "$out/kernel-tests-pytest.txt" python3 -m pytest "${plugins[@]}" tests/test_kernels.py -v -rs --durations=0 \
    || rc=1
  cache=$(mktemp -d)  # the second pass must load every variant the first compiled, and be as right
  for pass in 1 2; do
    mkdir -p "$out/kernel-tests-cute-cache-$pass"
    GEMMGUARD_CUTE_CACHE_DIR=$cache OUT=$out/kernel-tests-cute-cache-$pass \
      logged "$out/kernel-tests-cute-cache-$pass.txt" python3 scripts/check_cute.py --quick || rc=1
  done
  mkdir -p "$out/kernel-tests-cute-sm80"
  OUT=$out/kernel-tests-cute-sm80 logged "$out/kernel-tests-cute-sm80.txt" python3 scripts/check_cute.py --sm80 || rc=1
  grep -hE "^disk cache|^correctness|SM80-class correctness|BAD|^ERR|REFUSED" "$out"/kernel-tests-cute-*.txt | cut -c1-200
  return $rc
}

step_multi() {
  mkdir -p "$out/multi"
  OUT=$out/multi t bash scripts/gpu_multi.sh
}

# ---- run them

paths
summaries=()
status=0
for s in "${steps[@]}"; do
  echo "== gpu_validate: $s (logs: $out/$s*)"
  [ "$s" = install ] || record_env
  start=$SECONDS
  touch "$out/.step-start"
  ("step_${s//-/_}") >"$out/$s.txt" 2>&1  # a subshell: one step's settings never reach the next
  rc=$?
  [ "$s" = install ] && paths  # what it installed, for the steps after it
  [ $rc -ne 0 ] && status=1
  summaries+=("$(printf '%-13s rc=%-3s %5s s' "$s" "$rc" $((SECONDS - start)))")
  for f in "$out/$s.txt" "$out/$s"-*.txt; do
    [ -f "$f" ] && [ ! "$f" -ot "$out/.step-start" ] || continue  # this step's logs only
    line=$(grep -E '(passed|failed|skipped|xfailed|error|no tests ran).* in [0-9.]+s' "$f" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
    summaries+=("    ${f##*/}: ${line:+$line; }$(tail -1 "$f" | cut -c1-160)")
  done
done
echo "== gpu_validate: summary"
cat "$out/env.txt" 2>/dev/null
printf '%s\n' "${summaries[@]}"
exit $status
