"""Multi-GPU runners (--gemm-gpus, issue 16), on the CPU: which GPU each pytest-xdist worker gets, the
per-GPU benchmark lock, baselines keyed by GPU model, and one report naming the GPUs. The GPUs are fake:
GEMMGUARD_GPU_LIST stands for what `nvidia-smi -L` would report (gpus.py)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pytest_gemmguard import gpus
from pytest_gemmguard.bench import baseline
from pytest_gemmguard.errors import GemmUsageError

TWO = "GPU-aaaa-1111:NVIDIA H200,GPU-bbbb-2222:NVIDIA H200"
MIXED = "GPU-aaaa-1111:NVIDIA H200,GPU-cccc-3333:NVIDIA A100-SXM4-80GB"


def _fake(n: int) -> list[gpus.Gpu]:
    return [gpus.Gpu(i, f"GPU-{i:04d}", "NVIDIA H200") for i in range(n)]


# ---------------------------------------------------------------- assignment


@pytest.mark.parametrize("n_gpus", [1, 2, 8])
@pytest.mark.parametrize("n_workers", [1, 2, 3, 8, 16])
def test_workers_get_gpus_round_robin_and_each_gpu_is_used_evenly(n_gpus, n_workers):
    every = _fake(n_gpus)
    given = [gpus.assign(f"gw{k}", every) for k in range(n_workers)]
    assert given == [every[k % n_gpus] for k in range(n_workers)]
    if n_workers <= n_gpus:  # one worker per GPU: no two share one
        assert len({g.uuid for g in given}) == n_workers
    per = [sum(g == gpu for g in given) for gpu in every]
    assert max(per) - min(per) <= 1


def test_no_gpus_or_no_worker_id_assigns_nothing():
    assert gpus.assign("gw0", []) is None
    assert gpus.assign(None, _fake(2)) is None and gpus.assign("master", _fake(2)) is None


def test_the_setting_chooses_all_none_or_listed_indices_of_the_visible_gpus():
    every = _fake(4)
    assert gpus.chosen("all", every) == every and gpus.chosen("none", every) == []
    assert gpus.chosen([2, 0], every) == [every[2], every[0]]
    with pytest.raises(GemmUsageError, match=r"--gemm-gpus=0,5: no GPU 5 here \(4 visible: 0: NVIDIA H200"):
        gpus.chosen([0, 5], every)


def test_cuda_visible_devices_narrows_and_orders_like_cuda():
    every = _fake(4)
    assert gpus.visible(every, None) == every
    assert gpus.visible(every, "2,0") == [every[2], every[0]]
    assert gpus.visible(every, "GPU-0003,1") == [every[3], every[1]]  # UUIDs (and their prefixes) too
    assert gpus.visible(every, "1,9,2") == [every[1]]  # CUDA stops at the first entry naming no GPU
    assert gpus.visible(every, "") == [] and gpus.visible(every, "-1") == []


def test_the_fake_inventory_and_nvidia_smi_lines_parse(monkeypatch):
    monkeypatch.setenv(gpus.ENV_LIST, MIXED)
    assert [(g.index, g.uuid, g.name) for g in gpus.inventory()] == [
        (0, "GPU-aaaa-1111", "NVIDIA H200"),
        (1, "GPU-cccc-3333", "NVIDIA A100-SXM4-80GB"),
    ]
    line = "GPU 1: NVIDIA H200 (UUID: GPU-5f2c1b9e-0000-1111-2222-333344445555)"
    m = gpus._SMI_LINE.match(line)
    assert m and (m[1], m[2], m[3]) == ("1", "NVIDIA H200", "GPU-5f2c1b9e-0000-1111-2222-333344445555")
    assert gpus.Gpu.decode(gpus.Gpu(1, "GPU-x", "NVIDIA H200").encode()) == gpus.Gpu(1, "GPU-x", "NVIDIA H200")


def test_identity_names_the_physical_gpu_however_a_process_spells_its_device(monkeypatch):
    monkeypatch.setenv(gpus.ENV_LIST, TWO)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb-2222")  # a worker given GPU 1 calls it cuda:0
    masked = gpus.identity("cuda:0")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # a process that sees both calls the same card cuda:1
    assert masked == gpus.identity("cuda:1") == "GPU-bbbb-2222" != gpus.identity("cuda")
    assert gpus.timing_gpu("cpu") == {}
    assert gpus.timing_gpu("cuda:1") == {"index": 1, "uuid": "GPU-bbbb-2222", "name": "NVIDIA H200"}


def test_a_bad_gpus_value_is_one_usage_line(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("--gemm-gpus=0,0", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert errors == ["ERROR: --gemm-gpus='0,0': must be 'all', 'none' or distinct GPU indices like 0,2"]


# ---------------------------------------------------------------- a real pytest-xdist run

WHERE = """
import json, os
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], shapes=[(8, 8, 8)], max_examples=1)
def test_mm(gemm):
    gemm.check()
    with open(f"seen-{os.environ['PYTEST_XDIST_WORKER']}.json", "w") as fh:
        json.dump({k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "GEMMGUARD_WORKER_GPU")}, fh)
"""


def _xdist_run(pytester, monkeypatch, inventory, *args):
    pytest.importorskip("xdist")
    monkeypatch.setenv(gpus.ENV_LIST, inventory)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    pytester.makepyfile(test_where=WHERE)
    # --dist=each: every worker runs the test, so each one's environment is seen.
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gemm-backends=aten", "--dist=each", *args)


def _seen(pytester) -> dict:
    return {p.stem.removeprefix("seen-"): json.loads(p.read_text()) for p in pytester.path.glob("seen-gw*.json")}


def test_two_workers_get_two_gpus_and_the_report_names_both(pytester, monkeypatch):
    result = _xdist_run(pytester, monkeypatch, TWO, "-n", "2")
    result.assert_outcomes(passed=2)
    seen = _seen(pytester)
    assert {w: s["CUDA_VISIBLE_DEVICES"] for w, s in seen.items()} == {"gw0": "GPU-aaaa-1111", "gw1": "GPU-bbbb-2222"}
    out = result.stdout.str()
    assert "gemmguard: one GPU per worker (--gemm-gpus): gw0 -> GPU 0 NVIDIA H200 (GPU-aaaa-1111), " in out
    assert "gemmguard: GPU 0 NVIDIA H200 (GPU-aaaa-1111): 1 GEMM tests (passed 1)" in out  # the merged report
    assert "gemmguard: GPU 1 NVIDIA H200 (GPU-bbbb-2222): 1 GEMM tests (passed 1)" in out


def test_n_auto_starts_one_worker_per_gpu(pytester, monkeypatch):
    result = _xdist_run(pytester, monkeypatch, "GPU-a:X,GPU-b:X,GPU-c:X", "-n", "auto")
    result.assert_outcomes(passed=3)
    assert sorted(s["CUDA_VISIBLE_DEVICES"] for s in _seen(pytester).values()) == ["GPU-a", "GPU-b", "GPU-c"]


def test_one_listed_gpu_or_a_one_gpu_machine_degenerates_to_one_gpu(pytester, monkeypatch):
    result = _xdist_run(pytester, monkeypatch, TWO, "-n", "auto", "--gemm-gpus=1")
    result.assert_outcomes(passed=1)  # -n auto: one worker, on the one GPU listed
    assert [s["CUDA_VISIBLE_DEVICES"] for s in _seen(pytester).values()] == ["GPU-bbbb-2222"]
    for p in pytester.path.glob("seen-*.json"):
        p.unlink()
    result = _xdist_run(pytester, monkeypatch, "GPU-only:NVIDIA H200", "-n", "2")
    result.assert_outcomes(passed=2)  # more workers than GPUs share it (the lock keeps their timings apart)
    assert {s["CUDA_VISIBLE_DEVICES"] for s in _seen(pytester).values()} == {"GPU-only"}


def test_none_and_a_cpu_machine_leave_the_workers_environment_alone(pytester, monkeypatch):
    result = _xdist_run(pytester, monkeypatch, TWO, "-n", "2", "--gemm-gpus=none")
    result.assert_outcomes(passed=2)
    assert all(s == {"CUDA_VISIBLE_DEVICES": None, "GEMMGUARD_WORKER_GPU": None} for s in _seen(pytester).values())
    assert "one GPU per worker" not in result.stdout.str() and "GEMM tests (" not in result.stdout.str()
    result = _xdist_run(pytester, monkeypatch, "", "-n", "2")  # no GPU at all: as before issue 16
    result.assert_outcomes(passed=2)
    assert all(s["CUDA_VISIBLE_DEVICES"] is None for s in _seen(pytester).values())


def test_a_gpu_index_this_machine_lacks_is_one_usage_line(pytester, monkeypatch):
    result = _xdist_run(pytester, monkeypatch, TWO, "-n", "2", "--gemm-gpus=0,2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gemm-gpus=0,2: no GPU 2 here (2 visible: 0: NVIDIA H200, 1: NVIDIA H200)" in result.stderr.str()


# ---------------------------------------------------------------- the per-GPU lock

HOLD = """
import json, sys, time
from pytest_gemmguard.bench.gpu_lock import gpu_lock
with gpu_lock(sys.argv[1]):
    start = time.monotonic()
    time.sleep(0.6)
    print(json.dumps([start, time.monotonic()]))
"""


def _hold_together(tmp_path, masks: list[str]) -> list[list[float]]:
    env = {**os.environ, gpus.ENV_LIST: TWO, "TMPDIR": str(tmp_path)}  # lock files in this test's own dir
    procs = [
        subprocess.Popen([sys.executable, "-c", HOLD, "cuda"], env={**env, "CUDA_VISIBLE_DEVICES": mask},
                         stdout=subprocess.PIPE, text=True)
        for mask in masks
    ]  # fmt: skip
    return sorted(json.loads(p.communicate(timeout=60)[0]) for p in procs)


def test_timers_on_two_gpus_overlap_and_on_one_gpu_take_turns(tmp_path):
    first, second = _hold_together(tmp_path, ["GPU-aaaa-1111", "GPU-bbbb-2222"])
    assert second[0] < first[1], "two workers on different GPUs must time at the same moment"
    # The same GPU, named by UUID in one process and by index in the other: one timer at a time.
    first, second = _hold_together(tmp_path, ["GPU-aaaa-1111", "0"])
    assert second[0] >= first[1], "two workers on one GPU must never time at once"


# ---------------------------------------------------------------- baselines keyed by GPU model

HOST = {"machine": "x86_64", "cpu": "Xeon", "cpu_count": 32, "python": "3.11", "torch": "2.13", "device": "cuda",
        "cuda": "12.8", "driver": "570.1"}  # fmt: skip


def _entry(median: float, name: str, index: int) -> dict:
    return {"median_s": median, "gpu": {"index": index, "uuid": f"GPU-{index}", "name": name}}


def test_identical_cards_share_a_baseline_and_a_mixed_box_keys_them_apart(tmp_path):
    h200 = {**HOST, "gpu": "NVIDIA H200", "sm": "90"}
    a100 = {**HOST, "gpu": "NVIDIA A100-SXM4-80GB", "sm": "80"}
    path = str(tmp_path / "base.json")
    # Two H200s: the entries of both workers go under the plain keys, and either worker finds them.
    baseline.save(path, h200, {"t | a": _entry(1.0, "NVIDIA H200", 0), "t | b": _entry(2.0, "NVIDIA H200", 1)})
    assert set(json.loads(open(path).read())["entries"]) == {"t | a", "t | b"}
    loaded = baseline.load(path, h200)
    assert loaded.entry("t | a", "NVIDIA H200")["median_s"] == 1.0 and not loaded.forced
    # A mixed box (the controller's fingerprint names GPU 0, an H200): the A100's entry is keyed apart.
    mixed = str(tmp_path / "mixed.json")
    baseline.save(mixed, h200, {"t | a": _entry(1.0, "NVIDIA H200", 0)})
    baseline.save(mixed, h200, {"t | a": _entry(3.0, "NVIDIA A100-SXM4-80GB", 1)})
    assert set(json.loads(open(mixed).read())["entries"]) == {"t | a", "t | a @ NVIDIA A100-SXM4-80GB"}
    on_a100 = baseline.load(mixed, a100)  # the A100's worker: a file that holds its model is not foreign
    assert not on_a100.forced and on_a100.entry("t | a", "NVIDIA A100-SXM4-80GB")["median_s"] == 3.0
    assert baseline.load(mixed, h200).entry("t | a", "NVIDIA H200")["median_s"] == 1.0
    # An A100 machine and an H200-only file: foreign, as before issue 16.
    with pytest.raises(baseline.BaselineError, match="gpu: 'NVIDIA A100-SXM4-80GB' here vs 'NVIDIA H200'"):
        baseline.load(path, a100)


def test_an_older_baseline_with_a_gpu_count_still_matches_a_worker_that_sees_one_gpu(tmp_path):
    path = tmp_path / "old.json"
    here = {**HOST, "gpu": "NVIDIA H200", "sm": "90"}
    doc = {"format": "gemmguard-baseline", "version": 3, "fingerprint": {**here, "gpu_count": 8},
           "entries": {"t | a": {"median_s": 1.0}}}  # fmt: skip
    path.write_text(json.dumps(doc))
    loaded = baseline.load(str(path), here)
    assert not loaded.forced and loaded.entry("t | a", "NVIDIA H200") == {"median_s": 1.0}


# ---------------------------------------------------------------- the benchmark rows say which GPU


def test_benchmark_rows_and_markdown_name_the_gpu_that_timed_them_after_the_merge():
    from pytest_gemmguard.bench.export import markdown
    from pytest_gemmguard.bench.measurement import Measurement
    from pytest_gemmguard.bench.report import bench_table

    def row(index: int) -> Measurement:
        m = Measurement(key=f"t{index}", test="t", backend="triton", op="mm", shape=(64, 64, 64), dtype="bfloat16",
                        epilogue="none", layout="contiguous", device="cuda", fn="case", median_s=1e-3,
                        ci_low_s=0.9e-3, ci_high_s=1.1e-3, n=10, method="cuda-events", stopped="ci", samples=[1e-3],
                        ref_median_s=1e-3, flops=2.0 * 64**3, peak_tflops=None, compile_s=1.0, status="ok",
                        gpu={"index": index, "uuid": f"GPU-{index}", "name": "NVIDIA H200"})  # fmt: skip
        # The way a worker's measurement reaches the controller: as JSON on the test's report.
        return Measurement.from_dict(json.loads(json.dumps(m.as_dict())))

    rows = [row(0), row(1)]
    table = bench_table(rows)
    assert table[0].endswith("verdict      gpu")
    assert table[2].endswith("ok           0 H200") and table[3].endswith("ok           1 H200")
    text = markdown(rows, {"gpu": "NVIDIA H200"}, [])
    assert "| verdict | gpu |" in text and "| ok | 0 H200 |" in text and "| ok | 1 H200 |" in text
    cpu = Measurement.from_dict({**rows[0].as_dict(), "gpu": {}, "device": "cpu"})
    assert bench_table([cpu])[0].endswith(" verdict")  # the CPU table is as it was


def test_the_worker_env_is_set_before_the_worker_imports_anything():
    """The assignment travels in the spec's environment (execnet sets it before xdist's worker code runs),
    so no conftest that touches torch.cuda can initialise CUDA under the wrong mask."""
    execnet = pytest.importorskip("execnet")
    spec = execnet.XSpec("execmodel=main_thread_only//popen")
    spec.env.update(gpus.worker_env(gpus.Gpu(1, "GPU-b", "NVIDIA H200")))
    gateway = execnet.makegateway(spec)
    try:
        code = textwrap.dedent(
            """
            import os, sys
            channel.send([os.environ.get("CUDA_VISIBLE_DEVICES"), "torch" in sys.modules])
            """
        )
        assert gateway.remote_exec(code).receive(timeout=60) == ["GPU-b", False]
    finally:
        gateway.exit()


LOST = """
import os, pathlib

def test_first():
    pass

def test_gpu_is_lost():
    mark = pathlib.Path("lost-once")
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "GPU-bbbb-2222" and not mark.exists():
        mark.write_text(os.environ["PYTEST_XDIST_WORKER"])
        os._exit(3)  # what a lost device does to a worker: it dies mid-test

def test_after():
    with open(f"after-{os.environ['PYTEST_XDIST_WORKER']}.txt", "w") as fh:
        fh.write(os.environ.get("CUDA_VISIBLE_DEVICES", ""))
"""


def test_a_worker_whose_gpu_fails_ends_its_own_test_and_its_replacement_keeps_its_gpu(pytester, monkeypatch):
    pytest.importorskip("xdist")
    monkeypatch.setenv(gpus.ENV_LIST, TWO)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    pytester.makepyfile(test_lost=LOST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--dist=each")
    out = result.stdout.str()
    assert (pytester.path / "lost-once").read_text() == "gw1", out
    assert "worker 'gw1' crashed while running 'test_lost.py::test_gpu_is_lost'" in out, out
    result.assert_outcomes(passed=5, failed=1)  # the other GPU's worker ran all three
    after = {p.stem.removeprefix("after-"): p.read_text() for p in pytester.path.glob("after-*.txt")}
    # gw2 replaced gw1: the same spec, so the same GPU, and never the other worker's.
    assert after == {"gw0": "GPU-aaaa-1111", "gw2": "GPU-bbbb-2222"}, after


def test_the_benchmark_table_says_what_its_columns_mean_and_which_way_is_better():
    # A reader saw "vs ref 1.73" with no direction, a %peak above 100 and a ±CI beside a noise of another size.
    from pytest_gemmguard.bench.report import LEGEND, bench_table

    text = " ".join(LEGEND)
    for words in ("vs ref: compiled time / eager time", "below 1: faster", "+: slower", "above 100", "±CI: half-width"):
        assert words in text, words
    assert bench_table([])[-len(LEGEND) :] == list(LEGEND)
