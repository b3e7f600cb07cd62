#!/usr/bin/env bash
# gpu_multi.sh: issue 16's proof on a GPU machine: one pytest-xdist worker per GPU (--gemm-gpus).
#
#   scripts/gpu_multi.sh            (needs pytest-xdist: pip install pytest-xdist, or PIP_FIND_LINKS to a wheel)
#
# 1. where each worker runs: a throwaway test under -n auto prints, per worker, CUDA_VISIBLE_DEVICES, what
#    torch sees (device count, the UUID of cuda:0) and whether that UUID is the one nvidia-smi gave the worker
#    (gpus.identity trusts torch's UUID and nvidia-smi's to agree: this is where that is checked);
# 2. the README's GPU job suite (examples tests/gpu; GEMMGUARD_MULTI_TESTS to narrow it) with -n auto on
#    every GPU, then with -n auto --gemm-gpus=0 (one worker on GPU 0): the wall time of each and whether every
#    test ended the same way in both (per test, from their JUnit XML);
# 3. the benchmarks (scripts/gpu_bench_fixture.py) with -n auto: the rows with the GPU that timed each.
# On a one-GPU machine every step still runs, and step 1 must show one worker: it says so ("degenerates").
# Logs go to $OUT (default /tmp/gpu-multi); the last lines printed are a short table.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-multi}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
python3 -c "import xdist" 2>/dev/null || PIP_RETRIES=0 python3 -m pip install -q pytest-xdist >"$out/pip.txt" 2>&1 ||
  { echo "gpu_multi: pytest-xdist is not installed and could not be (see $out/pip.txt)"; exit 2; }
plugins=(-p no:cacheprovider)
for plugin in pytest_gemmguard.plugin pytest_gemmguard.bench.plugin; do  # by name unless an entry point loads it
  python3 -c "import importlib.metadata as m, sys; sys.exit(not any(e.value == sys.argv[1] for e in m.entry_points(group='pytest11')))" "$plugin" ||
    plugins+=(-p "$plugin")
done
nvidia-smi -L >"$out/gpus.txt" 2>&1
gpus=$(grep -c '^GPU ' "$out/gpus.txt")
backends=${GEMMGUARD_MULTI_BACKENDS:-aten,triton}
suite=${GEMMGUARD_MULTI_TESTS:-examples tests/gpu}
args=(--gemm-backends="$backends" --gemm-max-examples=2 --gemm-seed=20261201 --gemm-compile-timeout=240 -rs)
{ cat "$out/gpus.txt"; python3 -c "import torch, xdist; print('torch', torch.__version__, 'xdist', xdist.__version__)"; date -u; } >"$out/env.txt" 2>&1

echo "== 1. where each worker runs ($gpus GPU(s))"
probe=$(mktemp -d)
cat >"$probe/test_where.py" <<'EOF'
import json, os, subprocess
import torch

def test_where():
    smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    uuid = uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid
    seen = {"worker": os.environ.get("PYTEST_XDIST_WORKER"), "mask": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "count": torch.cuda.device_count(), "uuid": uuid, "name": torch.cuda.get_device_name(0),
            "in_smi": uuid in smi}
    print("WHERE " + json.dumps(seen))
    assert seen["count"] == 1 and seen["mask"] == uuid, seen
EOF
(cd "$probe" && timeout -k 5 300 python3 -m pytest "${plugins[@]}" -n auto --dist=each -s -q \
  --gemm-backends=aten test_where.py) >"$out/where.txt" 2>&1
where_rc=$?
grep -E "^WHERE|one GPU per worker|passed|failed|error" "$out/where.txt" | cut -c1-300
workers=$(grep -c '^WHERE' "$out/where.txt")
if [ "$gpus" -eq 1 ]; then
  [ "$workers" = 1 ] && echo "gpu_multi: one GPU: -n auto ran one worker on it (degenerates to today's single-GPU run)" ||
    echo "gpu_multi: one GPU but $workers workers: NOT the expected degenerate case"
fi

run() {  # run NAME ARGS...: the suite under those args, wall time and JUnit XML in $out
  local name=$1; shift
  local start=$SECONDS
  timeout -k 10 1500 python3 -m pytest "${plugins[@]}" $suite "${args[@]}" "$@" --junitxml="$out/$name.xml" \
    >"$out/$name.txt" 2>&1
  echo "rc=$? wall_s=$((SECONDS - start))" >>"$out/$name.txt"
}
echo "== 2. the suite on every GPU, then on GPU 0 alone"
run all_gpus -n auto
run one_gpu -n auto --gemm-gpus=0
verdicts=$(python3 - "$out/all_gpus.xml" "$out/one_gpu.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET

def ends(path):
    try:
        cases = ET.parse(path).getroot().iter("testcase")
    except (OSError, ET.ParseError) as exc:
        return {"<no JUnit XML>": str(exc)}
    out = {}
    for c in cases:
        kind = next((e.tag for e in c if e.tag in ("failure", "error", "skipped")), "passed")
        out[f"{c.get('classname')}::{c.get('name')}"] = kind
    return out

a, b = ends(sys.argv[1]), ends(sys.argv[2])
differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
for k in differ[:20]:
    print(f"  differs: {k}: all GPUs {a.get(k)}, one GPU {b.get(k)}", file=sys.stderr)
print(f"{len(a)} tests, {len(differ)} ended differently")
EOF
)
echo "$verdicts"

echo "== 3. benchmarks with -n auto: which GPU timed each row"
timeout -k 10 900 python3 -m pytest "${plugins[@]}" scripts/gpu_bench_fixture.py -n auto --gemm-backends="$backends" \
  --gemm-cold-compile=off --gemm-bench-time=0.5 --gemm-inconclusive=warn --gemm-report-json="$out/bench.json" \
  >"$out/bench.txt" 2>&1
echo "rc=$?" >>"$out/bench.txt"
sed -n '/gemmguard benchmarks/,$p' "$out/bench.txt" | head -40 | cut -c1-260
python3 - "$out/bench.json" <<'EOF' | tee "$out/bench_rows.txt"
import json, sys
try:
    rows = json.load(open(sys.argv[1]))["measurements"]
except (OSError, ValueError, KeyError) as exc:
    sys.exit(f"no benchmark report: {exc}")
for m in rows:
    g = m.get("gpu") or {}
    print(f"{m['backend']:8s} {m['op']}-{'x'.join(map(str, m['shape']))}-{m['dtype']:9s} "
          f"{m['median_s'] * 1e3:9.4f} ms  GPU {g.get('index')} {g.get('name')} {g.get('uuid')}")
used = {(m.get("gpu") or {}).get("uuid") for m in rows} - {None}
print(f"{len(rows)} rows timed on {len(used)} GPU(s)" if used else f"{len(rows)} rows, none timed on a GPU")
EOF

echo "== gpu_multi: summary ($gpus GPU(s); logs in $out)"
printf '%-10s %-8s %s\n' step rc result
printf '%-10s %-8s %s\n' where "$where_rc" "$workers worker(s) for $gpus GPU(s)"
for name in all_gpus one_gpu; do
  printf '%-10s %-8s %s\n' "$name" "$(grep -o 'rc=[0-9]*' "$out/$name.txt" | tail -1)" \
    "$(grep -o 'wall_s=[0-9]*' "$out/$name.txt" | tail -1); $(grep -o '[0-9]* workers' "$out/$name.txt" | head -1 || echo 'workers ?'); $(grep -E '(passed|failed|skipped|error).* in ' "$out/$name.txt" | tail -1 | tr -d '=')"
done
printf '%-10s %-8s %s\n' verdicts - "$verdicts"
printf '%-10s %-8s %s\n' bench "$(grep -o 'rc=[0-9]*' "$out/bench.txt" | tail -1)" "$(tail -1 "$out/bench_rows.txt")"
