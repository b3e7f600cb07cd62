#!/usr/bin/env bash
# gpu_job_local.sh: run the GPU job of .github/workflows/ci.yml on this machine, step by step, with the
# commands the workflow runs (tests/test_workflows.py checks that every `run:` of the job and every input of its
# gemmguard step appear here). For a GPU machine that is not a GitHub runner, to record the job's run.
#
#   scripts/gpu_job_local.sh [--base REF]
#
# --base REF   the commit the benchmarks compare with (the workflow: the pull request's base). Default HEAD:
#              an A/A run, the head measured against its own commit, which must pass. Without a git repository
#              (a copied tree) the tree is first committed into a throwaway one, so HEAD is this tree.
# The workflow's selection is the default; to fit a time limit, narrow it (same commands, fewer tests):
#   GEMMGUARD_GPU_TESTS, GEMMGUARD_GPU_ARGS, GEMMGUARD_GPU_BENCH, GEMMGUARD_GPU_BENCH_ARGS, GEMMGUARD_GPU_ROUNDS
# Reports: gemmguard-report/ (copied to $OUT/gemmguard-report when $OUT is set); the job summary GitHub would
# show is printed at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
base=HEAD
while [ $# -gt 0 ]; do
  case $1 in
  --base) base=$2; shift 2 ;;
  *) echo "gpu_job_local: unknown argument $1" >&2; exit 2 ;;
  esac
done
# What a GitHub runner provides to the steps.
RUNNER_TEMP=${RUNNER_TEMP:-$(mktemp -d)}
export RUNNER_TEMP
export GITHUB_STEP_SUMMARY=$RUNNER_TEMP/step-summary.md GITHUB_OUTPUT=$RUNNER_TEMP/output GITHUB_PATH=$RUNNER_TEMP/path
: >"$GITHUB_STEP_SUMMARY"; : >"$GITHUB_OUTPUT"; : >"$GITHUB_PATH"
export PYTHONUNBUFFERED=1
started=$SECONDS
step() { echo; echo "== gpu_job_local: $1 (at $((SECONDS - started)) s)"; }

step "Check the GPU"
python3 -m pytest_gemmguard.github check-gpu || exit 1

step "Install gemmguard over the runner's CUDA torch"
# No retries: on a machine without network pip would otherwise spend a minute retrying before it gives up.
if PIP_RETRIES=${PIP_RETRIES:-0} bash scripts/gpu_job_install.sh; then
  while read -r dir; do PATH=$dir:$PATH; done <"$GITHUB_PATH"  # as the runner applies GITHUB_PATH
else
  # An offline machine cannot build the editable install (pip fetches setuptools): run from the tree the way
  # scripts/gpu_validate.sh does. Not what a runner does; said here so the record shows it.
  echo "gpu_job_local: install failed (offline?): running from the tree with PYTHONPATH and both plugins named with -p"
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  # Both plugins (checks, benchmarks), each by name unless an installed entry point already loads it (twice
  # would be an error).
  for plugin in pytest_gemmguard.plugin pytest_gemmguard.bench.plugin; do
    if ! python3 -c "import importlib.metadata as m, sys; sys.exit(not any(e.value == sys.argv[1] for e in m.entry_points(group='pytest11')))" "$plugin"; then
      PYTEST_ADDOPTS="-p $plugin ${PYTEST_ADDOPTS:-}"
    fi
  done
  export PYTEST_ADDOPTS
  python() { python3 "$@"; }
fi
export PATH

step "Backends (cutlass when installed)"
list=$(python -m pytest_gemmguard.github backends --required aten,triton,cutedsl --optional cutlass) || exit 1
echo "list=$list" >> "$GITHUB_OUTPUT"
echo "backends: $list"

step "Tests, and benchmarks of the head against its base"
if ! git rev-parse --verify --quiet HEAD >/dev/null 2>&1; then
  echo "gpu_job_local: no git history here: committing this tree into a throwaway repository (base = this tree)"
  git init -q && git add -A && git -c user.name=gpu_job_local -c user.email=gpu@localhost commit -qm "snapshot" || exit 1
fi
base_sha=$(git rev-parse --verify "$base^{commit}") || { echo "gpu_job_local: no commit $base" >&2; exit 2; }
echo "base: $base ($base_sha)"
python -m pytest_gemmguard.github gate --title="GPU" --backends="$list" \
  --tests="${GEMMGUARD_GPU_TESTS:-examples tests/gpu}" \
  --pytest-args="${GEMMGUARD_GPU_ARGS:---gemm-max-examples=2 --gemm-seed=20261201 --gemm-compile-timeout=240}" \
  --bench-tests="${GEMMGUARD_GPU_BENCH:-scripts/gpu_bench_fixture.py}" \
  --bench-args="${GEMMGUARD_GPU_BENCH_ARGS:---gemm-cold-compile=off --gemm-bench-time=0.5}" \
  --baseline="base-commit" --base-ref="$base_sha" --rounds="${GEMMGUARD_GPU_ROUNDS:-3}" --known-failures="" \
  --out=gemmguard-report
rc=$?

step "Upload reports, plots and repro scripts (copied to \$OUT)"
if [ -n "${OUT:-}" ]; then cp -r gemmguard-report "$OUT/" && cp "$GITHUB_STEP_SUMMARY" "$OUT/step-summary.md"; fi
echo "== gpu_job_local: job summary"
cat "$GITHUB_STEP_SUMMARY"
echo "== gpu_job_local: exit status $rc after $((SECONDS - started)) s"
exit $rc
