"""Harvesting a model's own GEMMs (issue 15), through the public API and the command, with real torch.

The models are built here. Their GEMMs are traced on the meta device by `harvest_gemms` and counted
independently from the FX graph `make_fx` records when the same model runs on real CPU tensors; the
harvested suites run through the plugin with real Inductor compiles; the planted defect is a real
Inductor graph pass that is wrong for one of the model's shapes only.
"""

import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
import types
import warnings
from collections import Counter
from pathlib import Path

import pytest
import torch
from actrun import plants
from torch.fx.experimental.proxy_tensor import make_fx

from pytest_gemmguard import GemmUsageError, harvest_gemms
from pytest_gemmguard.__main__ import main
from pytest_gemmguard.cases.case import LAYOUTS, GemmCase, build_inputs, case_function
from pytest_gemmguard.cases.ops import op_takes
from pytest_gemmguard.harvest import (
    HarvestWarning,
    cases_for,
    harvest_config,
    load_harvest,
    markdown_table,
    merge,
    save_harvest,
    storage_of,
    to_json_text,
)
from pytest_gemmguard.run.decorator import gemm_case_space

REPO = Path(__file__).resolve().parent.parent

MODELS = '''
import torch
import torch.nn.functional as F
from torch import nn


class AttentionMLP(nn.Module):
    """q, k, v projections, a bmm attention, and an MLP written with F.linear on the module's own weights."""

    def __init__(self, d=16, hidden=24):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.w_up = nn.Parameter(torch.randn(hidden, d) / d**0.5)
        self.b_up = nn.Parameter(torch.randn(hidden))
        self.w_down = nn.Parameter(torch.randn(d, hidden) / hidden**0.5)
        self.b_down = nn.Parameter(torch.randn(d))

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        attn = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / 4, dim=-1)
        y = torch.bmm(attn, v) + x
        return F.linear(F.gelu(F.linear(y, self.w_up, self.b_up)), self.w_down, self.b_down) + y


class ToyMoE(nn.Module):
    """A router, then the experts as one batched GEMM over tokens grouped per expert (fixed capacity)."""

    def __init__(self, d=16, hidden=32, experts=4):
        super().__init__()
        self.experts = experts
        self.router = nn.Linear(d, experts, bias=False)
        self.w_in = nn.Parameter(torch.randn(experts, d, hidden) / d**0.5)
        self.w_out = nn.Parameter(torch.randn(experts, hidden, d) / hidden**0.5)

    def forward(self, x):  # x: (experts * capacity, d), already grouped by expert
        gate = torch.softmax(self.router(x), dim=-1).amax(dim=-1, keepdim=True)
        h = torch.relu(torch.bmm(x.view(self.experts, -1, x.shape[-1]), self.w_in))
        return torch.bmm(h, self.w_out).reshape(x.shape) * gate


def encoder():
    return nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=24, batch_first=True).eval()


def attention_mlp():
    return AttentionMLP()


def toy_moe():
    return ToyMoE()
'''

models = types.ModuleType("harvest_test_models")
exec(compile(MODELS, "<harvest test models>", "exec"), models.__dict__)

# (factory, input shape, the GEMMs expected: (op, batch, M, N, K, layout, epilogue, count))
MODEL_CASES = {
    "attention_mlp": (
        models.attention_mlp, (2, 5, 16),
        {
            ("linear", 0, 10, 16, 16, "contiguous", "none", 3),  # q, k, v over (2, 5, 16): M = B·T
            ("bmm", 2, 5, 5, 16, "transposed_b", "none", 1),  # q @ k^T: k^T is a column-major view
            ("bmm", 2, 5, 16, 5, "contiguous", "residual", 1),  # attn @ v, + x
            ("linear", 0, 10, 24, 16, "contiguous", "gelu", 1),  # F.linear on the module's own weights
            ("linear", 0, 10, 16, 24, "contiguous", "residual", 1),
        },
    ),
    "toy_moe": (
        models.toy_moe, (24, 16),
        {
            ("mm", 0, 24, 4, 16, "transposed_b", "none", 1),  # router: a linear without bias is mm(x, w.t())
            ("bmm", 4, 6, 32, 16, "contiguous", "relu", 1),  # the experts' batched GEMM
            ("bmm", 4, 6, 16, 32, "contiguous", "none", 1),
        },
    ),
    "encoder": (
        models.encoder, (2, 5, 16),
        {
            ("linear", 0, 10, 48, 16, "contiguous", "none", 1),  # packed in-projection (input transposed: copied)
            ("linear", 0, 10, 16, 16, "contiguous", "none", 1),  # out-projection
            ("linear", 0, 10, 24, 16, "contiguous", "relu", 1),
            ("linear", 0, 10, 16, 24, "contiguous", "residual", 1),
        },
    ),
}  # fmt: skip


def _harvest_quietly(model, *inputs, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HarvestWarning)
        return harvest_gemms(model, *inputs, **kwargs)


def _aten_gemms(model, x):
    """GEMMs counted from the FX graph make_fx records running the model on real CPU tensors:
    (batch, M, N, K) per mm/addmm/bmm/baddbmm node, and the fused attention nodes."""
    aten = torch.ops.aten
    gemms, fused = Counter(), 0
    for node in make_fx(model)(x).graph.nodes:
        if node.op != "call_function":
            continue
        vals = [a.meta.get("val") for a in node.args if hasattr(a, "meta")]
        shapes = [tuple(v.shape) for v in vals if isinstance(v, torch.Tensor)]
        if node.target in (aten.mm.default, aten.bmm.default):
            a, b = shapes
        elif node.target in (aten.addmm.default, aten.baddbmm.default):
            _, a, b = shapes
        else:
            fused += "attention" in str(node.target)
            continue
        gemms[(a[0] if len(a) == 3 else 0, a[-2], b[-1], a[-1])] += 1
    return gemms, fused


@pytest.mark.parametrize("name", list(MODEL_CASES))
def test_harvest_matches_the_gemms_of_the_models_own_fx_graph(name):
    factory, shape, expected = MODEL_CASES[name]
    torch.manual_seed(0)
    real = factory()
    with torch.device("meta"):
        meta_model = factory()
    harvest = _harvest_quietly(meta_model, torch.empty(shape, device="meta"))
    got = {(g.op, g.batch, g.m, g.n, g.k, g.layout, g.epilogue, g.count) for g in harvest}
    assert got == expected, markdown_table(harvest)
    assert all(g.dtype == "float32" for g in harvest)
    # The same GEMMs, as often, as the graph of the model running for real on the CPU.
    counted, fused = _aten_gemms(real, torch.randn(shape))
    harvested = Counter()
    for g in harvest:
        harvested[(g.batch, g.m, g.n, g.k)] += g.count
    assert harvested == counted
    attention = [s for s in harvest.skipped if "scaled_dot_product_attention" in s.what]
    assert sum(s.count for s in attention) == fused and harvest.skipped == attention
    assert all("fused attention" in s.why for s in attention)


def test_items_read_as_attributes_and_linear_over_3d_input_is_m_times_t():
    with torch.device("meta"):
        model = models.attention_mlp()
    g = next(g for g in _harvest_quietly(model, torch.empty(3, 7, 16, device="meta")) if g.epilogue == "gelu")
    assert (g.op, g.m, g.n, g.k, g.batch, g.dtype) == ("linear", 21, 24, 16, 0, "float32")
    assert g.shape == (21, 24, 16) and g.operands == ("row", "row") and g.sources == ("aten.linear",)
    assert g.case() == GemmCase("linear", 21, 24, 16, 0, "float32", "contiguous", "gelu")


# gemmguard's own cases, harvested back: every layout of every op (but aliased: see below), epilogue chains with
# each step.
ROUND_TRIP = [
    *(GemmCase(op, 5, 7, 9, 3 if op in ("bmm", "baddbmm") else 0, "float32", lay) for op in ("mm", "linear", "bmm")
      for lay in LAYOUTS if op_takes(op, "float32", lay) and lay != "aliased"),
    GemmCase("baddbmm", 5, 7, 9, 2, "bfloat16", "broadcast", "relu"),
    GemmCase("addmm", 5, 7, 9, 0, "float32", "transposed_ab", "bias+relu"),
    GemmCase("baddbmm", 5, 7, 9, 2, "float32", "offset", "gelu+scale"),
    GemmCase("linear", 5, 7, 9, 0, "bfloat16", "transposed_b", "silu+residual+cast"),
    GemmCase("bmm", 5, 7, 9, 2, "float16", "noncontiguous", "sigmoid"),
    GemmCase("mm", 5, 7, 9, 0, "float32", "contiguous", "tanh+cast+residual"),
    GemmCase("scaled_mm", 5, 16, 32, 0, "float8_e4m3fn", "transposed_b", "relu"),
    GemmCase("scaled_mm_rowwise", 5, 16, 32, 0, "float8_e4m3fn", "transposed_b"),
    # Blockwise: the recipe from the scales' shapes (traced through the meta function: the CPU takes none of them).
    GemmCase("scaled_mm_block_1x128_128x128", 200, 272, 384, 0, "float8_e4m3fn", "transposed_b", "gelu"),
    GemmCase("scaled_mm_block_128x128_1x128", 200, 272, 384, 0, "float8_e4m3fn", "transposed_b"),
]  # fmt: skip


@pytest.mark.parametrize("case", ROUND_TRIP, ids=lambda c: c.describe().replace(" ", "-"))
def test_gemmguards_own_cases_are_harvested_back_as_themselves(case):
    """Layouts from strides, the epilogue from the GEMM's consumers, the scaled ops from their scales:
    harvesting the function and inputs a case compiles gives back exactly that case."""
    inputs = build_inputs(case, "cpu")
    harvest = _harvest_quietly(case_function(case.op, case.epilogue, case.dtype), *inputs.flat)
    assert [g.case() for g in harvest] == [case] and not harvest.skipped


@pytest.mark.parametrize(("op", "batch", "as_layout"), [("mm", 0, "transposed_b"), ("linear", 0, "contiguous"),
                                                         ("bmm", 3, "transposed_b")])  # fmt: skip
def test_an_aliased_case_is_harvested_by_its_operands_strides(op, batch, as_layout):
    """The harvest reads each operand's storage on its own (docs/harvest.md): B = A.T is column-major, a linear's
    weight that is its input is row-major."""
    case = GemmCase(op, 5, 5, 9, batch, "float32", "aliased")
    harvest = _harvest_quietly(case_function(case.op, case.epilogue, case.dtype), *build_inputs(case, "cpu").flat)
    assert [g.case() for g in harvest] == [dataclasses.replace(case, layout=as_layout)] and not harvest.skipped


def test_storage_gemmguard_cannot_build_is_named():
    assert storage_of((4, 8), (8, 1)) == "row" and storage_of((4, 8), (1, 4)) == "col"
    assert storage_of((4, 8), (24, 1)) == "padded rows"  # a slice of a fused QKV output
    assert storage_of((2, 4, 8), (0, 8, 1)) == "broadcast"  # gemmguard's: one matrix shared across the batch
    assert storage_of((4, 8), (0, 1)) == storage_of((2, 4, 8), (32, 0, 1)) == "a zero stride inside the matrix"
    assert storage_of((4, 8), (1, 4), offset=5) == "column-major with a storage offset"
    assert storage_of((4, 8), (16, 2)) == "strided" and storage_of((4, 8), (8, 1), offset=3) == "offset"


class Unexpressible(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)
        self.w = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x):  # x: (2, 4, 8)
        q, k, _ = self.qkv(x).chunk(3, dim=-1)
        scores = torch.bmm(q, k.transpose(1, 2))  # q and k are slices of one buffer: padded rows
        flat = x.reshape(8, 8)
        scaled = torch.addmm(flat, flat, self.w, beta=0.5)  # beta != 1 and a full (M, N) bias
        wide = torch.mm(flat.double(), self.w.double())  # float64
        vec = torch.mv(self.w, flat[0])  # a matrix-vector product
        return scores, scaled, wide, vec, self.qkv(x)


def test_gemms_gemmguard_cannot_express_are_listed_with_why_in_one_warning_line():
    with torch.device("meta"):
        model = Unexpressible()
    with pytest.warns(HarvestWarning) as record:
        harvest = harvest_gemms(model, torch.empty(2, 4, 8, device="meta"))
    [g] = harvest  # only the qkv projection (run twice) is a gemmguard case
    assert (g.op, g.m, g.n, g.k, g.count) == ("linear", 8, 24, 8, 2)
    whys = {s.what.split(" on ")[0]: s.why for s in harvest.skipped}
    assert set(whys) == {"aten.bmm", "aten.addmm", "aten.mm", "aten.mv"}, harvest.skipped
    assert "padded rows" in whys["aten.bmm"] and "beta=0.5" in whys["aten.addmm"]
    assert "float64" in whys["aten.mm"] and "matrix-vector" in whys["aten.mv"]
    [warning] = record
    line = str(warning.message)
    assert "\n" not in line and line.startswith("gemmguard: harvest skipped 4 GEMM kinds (4 calls)")
    assert all(s.why in line for s in harvest.skipped)


def test_dtype_is_the_parameter_dtype_unless_given_and_explicit_upcasts_stay():
    class Mixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(16, 8)

        def forward(self, x):
            y = self.proj(x)
            return y.float() @ y.float().t()  # computed in float32 on purpose

    with torch.device("meta"):
        model = Mixed().to(torch.bfloat16)
    x = torch.empty(4, 16, device="meta", dtype=torch.bfloat16)
    assert {(g.op, g.dtype) for g in _harvest_quietly(model, x)} == {("linear", "bfloat16"), ("mm", "float32")}
    assert {(g.op, g.dtype) for g in _harvest_quietly(model, x, dtype="float16")} == {
        ("linear", "float16"),
        ("mm", "float32"),
    }
    assert {g.dtype for g in _harvest_quietly(model, x, dtype=torch.float16)} == {"float16", "float32"}
    with pytest.raises(GemmUsageError, match="float8"):
        harvest_gemms(model, x, dtype="float8_e4m3fn")


def test_around_adds_nearby_m_after_the_models_own_sizes():
    with torch.device("meta"):
        harvest = _harvest_quietly(models.toy_moe(), torch.empty(24, 16, device="meta"))
    exact = cases_for(harvest)
    near = cases_for(harvest, around=True, seed=5)
    assert [c.m for c in exact] == [6, 6, 24] and all(c.seed == 5 for c in near)  # sorted: bmm before mm
    assert near[:3] == [dataclasses.replace(c, seed=5) for c in exact]
    router = [c.m for c in near[3:] if c.op == "mm"]
    assert router == [23, 25, 32, 1]  # M ± 1, next multiples of 8 (32) and 16 (32, once), decode
    experts = [c.m for c in near[3:] if c.op == "bmm"]
    assert experts == [5, 7, 8, 16, 1] * 2
    assert len(set(near)) == len(near) and {(c.n, c.k) for c in near} == {(c.n, c.k) for c in exact}


# ---------------------------------------------------------------- the file and the command


def _write_models(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "harvest_models.py").write_text(MODELS + BROKEN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("harvest_models", None)


BROKEN = """

class DataDependent(nn.Module):
    def forward(self, x):
        return x @ x.t() if x.sum() > 0 else x  # a branch on a value: no trace on the meta device


def data_dependent():
    return DataDependent()


def not_a_module():
    return 42
"""


def test_command_writes_a_stable_sorted_file_atomically_and_keeps_its_mode(tmp_path, monkeypatch, capsys):
    _write_models(tmp_path, monkeypatch)
    out = tmp_path / "gemms.json"
    assert main(["harvest", "harvest_models:attention_mlp", "--inputs", "2,5,16", "--out", str(out)]) == 0
    assert "5 distinct GEMMs (7 calls) written to" in capsys.readouterr().out
    text = out.read_text()
    data = json.loads(text)
    assert text.endswith("}\n") and text == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert data["format"] == "gemmguard-harvest" and data["version"] == 1
    assert data["source"] == {"model": "harvest_models:attention_mlp", "inputs": [[2, 5, 16]]}
    fields = ("op", "batch", "m", "n", "k", "dtype", "layout", "epilogue")
    keys = [tuple(g[f] for f in fields) for g in data["gemms"]]
    assert keys == sorted(keys) and len(keys) == 5
    with torch.device("meta"):
        direct = _harvest_quietly(models.attention_mlp(), torch.empty(2, 5, 16, device="meta"))
    assert list(load_harvest(out)) == list(direct)
    os.chmod(out, 0o640)
    before = out.stat().st_ino
    assert main(["harvest", "harvest_models:attention_mlp", "--inputs", "2,5,16", "--out", str(out)]) == 0
    assert out.read_text() == text  # an unchanged model re-harvests byte for byte
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and out.stat().st_ino != before  # replaced, mode kept
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp file left


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["harvest", "no_such_module:build", "--inputs", "2,5,16"], "cannot import 'no_such_module'"),
        (["harvest", "harvest_models:nope", "--inputs", "2,5,16"], "'harvest_models' has no attribute 'nope'"),
        (["harvest", "harvest_models", "--inputs", "2"], "expected MODULE:FACTORY"),
        (["harvest", "harvest_models:not_a_module", "--inputs", "2"], "returned int, not an nn.Module"),
        (["harvest", "harvest_models:data_dependent", "--inputs", "4,4"], "could not trace DataDependent:"),
        (["harvest", "harvest_models:toy_moe", "--inputs", "2,x"], "--inputs '2,x': expected sizes >= 1"),
        (["harvest", "harvest_models:toy_moe"], "give the model's inputs"),
        (["harvest", "--config", "missing.json"], "cannot read config missing.json"),
        (["harvest", "harvest_models:toy_moe", "--inputs", "24,16", "--dtype", "int8"], "harvest dtype='int8'"),
    ],
)
def test_command_errors_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys, argv, message):
    _write_models(tmp_path, monkeypatch)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gemmguard: ") and message in err, err


def test_the_real_command_names_what_it_skipped_on_stderr(tmp_path):
    (tmp_path / "harvest_models.py").write_text(MODELS)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_gemmguard", "harvest", "harvest_models:encoder", "--inputs", "2,5,16",
         "--out", "gemms.json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith("gemmguard: harvest skipped 1 GEMM kind (1 call)") and "fused attention" in line
    skipped = json.loads((tmp_path / "gemms.json").read_text())["skipped"]
    assert [s["what"].split(" on ")[0] for s in skipped] == ["aten.scaled_dot_product_attention"]
    bad = subprocess.run(
        [sys.executable, "-m", "pytest_gemmguard", "harvest", "nowhere:model", "--inputs", "2"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.splitlines() == [
        "gemmguard: model 'nowhere:model': cannot import 'nowhere' (No module named 'nowhere')"
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('{"entries": {}}', 'is not a gemmguard harvest file (no "format": "gemmguard-harvest")'),
        ('{"format": "gemmguard-harvest", "version": 99, "gemms": []}', "format version 99; this gemmguard reads"),
        ('{"format": "gemmguard-harvest", "version": 1, "gemms": [{"op": "gemv"}]}', "gemms[0]: missing 'dtype'"),
        (
            '{"format": "gemmguard-harvest", "version": 1, "gemms": [{"op": "bmm", "m": 2, "n": 2, "k": 2,'
            ' "batch": 0, "count": 1, "dtype": "float32", "layout": "contiguous"}]}',
            "gemms[0]: batch=0 does not suit bmm",
        ),
        (
            '{"format": "gemmguard-harvest", "version": 1, "gemms": [{"op": "mm", "m": 2, "n": 3, "k": 2,'
            ' "batch": 0, "count": 1, "dtype": "float32", "layout": "aliased"}]}',
            "gemms[0]: layout aliased needs n = m (B is A transposed); m=2, n=3",
        ),
    ],
)
def test_a_corrupt_or_foreign_file_is_one_clear_line(tmp_path, content, message):
    path = tmp_path / "gemms.json"
    path.write_text(content)
    with pytest.raises(GemmUsageError) as info:
        load_harvest(path)
    assert message in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(GemmUsageError, match="harvest file"):
        gemm_case_space("@gemm_case", harvested=str(path))


def test_gemm_case_harvested_arguments_are_validated():
    with pytest.raises(GemmUsageError, match=r"around=\.\.\.\) goes with harvested="):
        gemm_case_space("@gemm_case", around=True)
    with pytest.raises(GemmUsageError, match="drop ops="):
        gemm_case_space("@gemm_case", harvested=[], ops=["mm"])
    with pytest.raises(GemmUsageError, match="the harvest holds no GEMM"):
        gemm_case_space("@gemm_case", harvested=[])
    with pytest.raises(GemmUsageError, match="does not exist"):
        gemm_case_space("@gemm_case", harvested="nowhere.json")
    with torch.device("meta"):
        harvest = _harvest_quietly(models.toy_moe(), torch.empty(24, 16, device="meta"))
    spec = gemm_case_space("@gemm_case", harvested=harvest, around=True, max_examples=4)
    assert spec.cases == tuple(cases_for(harvest, around=True)) and spec.max_examples == 4


# ---------------------------------------------------------------- harvested suites through the plugin

SUITE = """
import pytest
import torch

from harvest_models import attention_mlp
from pytest_gemmguard import gemm_case, harvest_gemms

with torch.device("meta"):
    GEMMS = harvest_gemms(attention_mlp(), torch.empty(2, 5, 16, device="meta"))


@gemm_case(harvested=GEMMS)
def test_attention_mlp(gemm):
    gemm.check()


@pytest.mark.parametrize("g", [g for g in GEMMS if g.epilogue == "gelu"], ids=str)
def test_bench(gemm_benchmark, g):
    m = gemm_benchmark(**g.bench_kwargs())
    assert m.kernels and m.median_s > 0
"""


def test_a_harvested_suite_runs_and_passes_on_aten_and_cpp(pytester):
    pytester.makepyfile(harvest_models=MODELS)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_inprocess(
        "--gemm-backends=aten,cpp", "-p", "no:cacheprovider", "--gemm-cold-compile=off", "--gemm-bench-time=0.2",
        "-v",
    )  # fmt: skip
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    assert "test_bench[aten-linear-10x24x16-float32-contiguous-gelu]" in out
    for backend in ("aten", "cpp"):
        # Per backend: both tests passed; the model's five GEMMs and the benchmark's own check verified, and
        # nothing else ran (no random draws), nothing unsupported.
        # (the results table's row: the benchmark summary above it has a row per backend too, without "|")
        row = next(line for line in out.splitlines() if re.match(rf"{backend} +(\d+ +){{4}}\|", line)).split()
        assert row[1:4] == ["2", "0", "0"] and row[6:9] == ["6", "0", "0"], row


# A real Inductor graph pass that corrupts GEMMs of two output shapes (M, N), and no others: the MLP's
# up-projection, and M = 16 of a 16-wide projection.
# Sizes compared as text: in gemmguard's compile with dynamic shapes (crosscheck/sizes.py) M is a SymInt, unhashable.
PLANTED = plants.planted_backend(
    "wrong-one-shape",
    plants.shift_gemms(
        "SkewOneShape", 0.01, when='tuple(map(str, node.meta["val"].shape)) in {("10", "24"), ("16", "16")}'
    ),
    once=True,
)

PLANTED_SUITE = """
from pytest_gemmguard import gemm_case
from pytest_gemmguard.harvest import load_harvest

QKV = [g for g in load_harvest(__file__.replace("test_planted.py", "gemms.json")) if g.count == 3]


@gemm_case(harvested="gemms.json")  # beside this file
def test_model(gemm):
    gemm.check()


@gemm_case(harvested=QKV)
def test_qkv_exact(gemm):
    gemm.check()


@gemm_case(harvested=QKV, around=True)
def test_qkv_around(gemm):
    gemm.check()
"""


def test_a_defect_in_one_of_the_models_shapes_is_caught(pytester):
    with torch.device("meta"):
        save_harvest(pytester.path / "gemms.json", _harvest_quietly(models.attention_mlp(), torch.empty(2, 5, 16)))
    pytester.makeconftest(PLANTED)
    pytester.makepyfile(test_planted=PLANTED_SUITE)
    result = pytester.runpytest_inprocess("--gemm-backends=wrong-one-shape", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    failing = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert any("test_model[" in line for line in failing) and any("test_qkv_around[" in line for line in failing)
    # The model's own up-projection (M = B·T = 10, N = 24) is the GEMM reported wrong.
    assert "case:     linear 10×24×16 float32 contiguous epilogue=gelu" in out
    # Its 16-wide projections are right at the model's M = 10; around=True finds M = 16 wrong.
    assert "case:     linear 16×16×16 float32 contiguous epilogue=none" in out


# ---------------------------------------------------------------- a Llama-style config (transformers)

LLAMA = REPO / "tests" / "data" / "llama3_8b_config.json"
DOC = REPO / "docs" / "harvest.md"


def test_a_llama_config_harvests_on_meta_and_the_docs_are_current():
    pytest.importorskip("transformers")
    runs = []
    for batch in (1, 8):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HarvestWarning)
            harvest = harvest_config(LLAMA, batch=batch, seq=512)
        runs.append(harvest)
        m = 512 * batch  # 32 layers of Llama-3-8B's shapes, bias-free projections: mm(x, w.t())
        got = {(g.op, g.m, g.n, g.k, g.dtype, g.layout, g.epilogue, g.count) for g in harvest}
        assert got == {
            ("mm", m, 4096, 4096, "bfloat16", "transposed_b", "none", 32),  # q_proj
            ("mm", m, 1024, 4096, "bfloat16", "transposed_b", "none", 64),  # k_proj, v_proj (8 KV heads)
            ("mm", m, 4096, 4096, "bfloat16", "transposed_b", "residual", 32),  # o_proj
            ("mm", m, 14336, 4096, "bfloat16", "transposed_b", "silu", 32),  # gate_proj
            ("mm", m, 14336, 4096, "bfloat16", "transposed_b", "none", 32),  # up_proj
            ("mm", m, 4096, 14336, "bfloat16", "transposed_b", "residual", 31),  # down_proj
            # the last layer's residual feeds only the final RMSNorm, whose first op is a float32 cast
            ("mm", m, 4096, 14336, "bfloat16", "transposed_b", "residual+cast", 1),
            ("mm", m, 128256, 4096, "bfloat16", "transposed_b", "none", 1),  # lm_head
        }
        [sdpa] = harvest.skipped
        assert sdpa.count == 32 and sdpa.what.startswith(f"aten.scaled_dot_product_attention on ({batch}, 32, 512")
        # docs/harvest.md holds this very table.
        assert markdown_table(harvest) in DOC.read_text(), f"docs/harvest.md is stale for batch {batch}"
    # ... and the harvest file the H200 script runs is this harvest, byte for byte.
    source = {"config": "tests/data/llama3_8b_config.json", "batch": [1, 8], "seq": 512}
    assert to_json_text(merge(runs, source)) == (REPO / "docs" / "harvest" / "llama3_8b.json").read_text()
