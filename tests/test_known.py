"""The known-failures file: format and validation, matching, the XPASS rule, and the shipped entries
checked against the real sweep of torch 2.13's CPP template (tests/data/cpp_offset_sweep.jsonl, written
by scripts/cpp_offset_sweep.py) and against a real compile."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from importlib.metadata import version as dist_version

import pytest
from actrun import plants

from pytest_gemmguard import known as kn
from pytest_gemmguard.cases.case import GemmCase, build_inputs
from pytest_gemmguard.errors import GemmUsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = kn.shipped_path()
SWEEP = os.path.join(ROOT, "tests", "data", "cpp_offset_sweep.jsonl")
TORCH_213 = {"torch": "2.13.0+cpu"}
NAMES = kn.Names(
    backends=("aten", "cpp", "cutedsl"),
    ops=("mm", "addmm", "bmm", "linear"),
    dtypes=("float32", "bfloat16", "float16"),
    layouts=("contiguous", "transposed_b", "offset"),
    steps=("bias", "relu", "gelu", "cast"),
    values=("normal", "nan", "inf"),
)

GOOD_ENTRY = """
[[known]]
id = "good"
backend = "cpp"
versions = { torch = ">=2.13,<2.14" }
kind = "wrong-result"
link = "https://example.org/bug/1"
reason = "a known bug"
"""


def write(tmp_path, text: str, name: str = "known.toml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def case(op="linear", m=5, n=6, k=130, dtype="float32", layout="offset", epilogue="none", batch=0, values="normal"):
    return GemmCase(op, m, n, k, batch, dtype, layout, epilogue, values=values)


# ---------------------------------------------------------------- the module itself


def test_known_module_imports_no_torch(tmp_path):
    # The plugin reads the file when pytest starts: known/ (and what it imports) must not pull in torch.
    # The package __init__ imports torch today, so a bare package stands in for it.
    path = write(tmp_path, GOOD_ENTRY)
    code = f"""
import sys, types
pkg = types.ModuleType("pytest_gemmguard"); pkg.__path__ = [{os.path.join(ROOT, "pytest_gemmguard")!r}]
sys.modules["pytest_gemmguard"] = pkg
from pytest_gemmguard import known
names = known.Names(("cpp",), ("mm",), ("float32",), ("offset",), ("relu",))
kf = known.load({path!r}, names)
versions = known.installed_versions(kf.packages())
assert versions["torch"], versions
print("torch" in sys.modules, len(kf.entries))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "1"]


def test_a_good_file_parses_every_key(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "bug.md").write_text("# bug\n")
    path = write(
        tmp_path,
        """
        [[known]]
        id = "every-key"
        backend = ["cpp", "aten"]
        route = "nvgemm"
        ops = ["linear", "MM"]
        dtypes = "float32"
        layouts = ["offset"]
        epilogues = ["none", "Bias + ReLU"]
        m = ">=2,<8"
        n = 6
        k = "%8!=0"
        batch = "==0"
        candidates = ["triton_mm_persistent_tma_*", "extern_kernels.mm"]
        versions = { torch = ">=2.13,<2.14", triton = "" }
        kind = "any"
        link = "docs/bug.md#bug"
        reason = \"\"\"spread over
           two lines\"\"\"

        [[known]]
        id = "minimal"
        backend = "cutedsl"
        versions = { torch = "==2.11.0" }
        kind = "raises"
        link = "http://example.org/x"
        reason = "r"
        """,
    )
    kf = kn.load(path, NAMES)
    every, minimal = kf.entries
    assert every.backends == ("cpp", "aten") and every.routes == ("nvgemm",)
    assert every.ops == ("linear", "mm") and every.dtypes == ("float32",) and every.layouts == ("offset",)
    assert every.epilogues == ("none", "bias+relu")
    assert set(every.sizes) == {"m", "n", "k", "batch"}
    assert every.kind == "any" and every.link == "docs/bug.md#bug" and every.reason == "spread over two lines"
    assert set(every.versions) == {"torch", "triton"} and every.index == 1
    assert every.candidates == ("triton_mm_persistent_tma_*", "extern_kernels.mm")
    assert minimal.ops is None and minimal.sizes == {} and minimal.routes is None and minimal.index == 2
    assert minimal.candidates is None
    assert kf.packages() == ("torch", "triton")


def test_an_empty_file_has_no_entries(tmp_path):
    assert kn.load(write(tmp_path, "# nothing known yet\n"), NAMES).entries == ()


# ---------------------------------------------------------------- malformed files: one line, naming the key

_ENTRY_KEYS = dict(
    id='"e1"',
    backend='"cpp"',
    versions='{ torch = ">=2.13" }',
    kind='"wrong-result"',
    link='"https://example.org/1"',
    reason='"r"',
)


def entry_text(drop=(), **overrides) -> str:
    keys = {k: v for k, v in {**_ENTRY_KEYS, **overrides}.items() if k not in drop}
    return "[[known]]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items())


MALFORMED = [
    # (name, file text, the key the message must name, a fragment of the fix)
    ("unknown key", entry_text(dtype='"float32"'), "dtype", "valid: id, backend"),
    ("missing backend", entry_text(drop=("backend",)), "backend", "every entry needs"),
    ("missing link", entry_text(drop=("link",)), "link", "every entry needs"),
    ("missing reason", entry_text(drop=("reason",)), "reason", "every entry needs"),
    ("missing versions", entry_text(drop=("versions",)), "versions", "every entry needs"),
    ("missing kind", entry_text(drop=("kind",)), "kind", "every entry needs"),
    ("missing id", entry_text(drop=("id",)), "id", "every entry needs"),
    ("backend not a string", entry_text(backend="3"), "backend", "must be a backend"),
    ("unknown backend", entry_text(backend='["cpp", "cuda"]'), "backend", "unknown backend 'cuda'; valid: aten"),
    ("empty op list", entry_text(ops="[]"), "ops", "non-empty list"),
    ("unknown op", entry_text(ops='["matmul"]'), "ops", "unknown op 'matmul'; valid: mm"),
    ("unknown dtype", entry_text(dtypes='"fp32"'), "dtypes", "unknown dtype 'fp32'; valid: float32"),
    ("unknown layout", entry_text(layouts='["offset3"]'), "layouts", "unknown layout 'offset3'"),
    ("unknown values", entry_text(values='["zero"]'), "values", "unknown kind of values 'zero'; valid: normal"),
    ("unknown epilogue step", entry_text(epilogues='["bias+swish"]'), "epilogues", "unknown epilogue step 'swish'"),
    ("size not int or string", entry_text(m="1.5"), "m", "not an integer or a condition"),
    ("size is a bool", entry_text(n="true"), "n", "not an integer or a condition"),
    ("bad size clause", entry_text(k='"=>2"'), "k", "not a clause; write ==N"),
    ("modulus zero", entry_text(batch='"%0==1"'), "batch", "use a modulus >= 1"),
    ("versions not a table", entry_text(versions='">=2.13"'), "versions", "non-empty table"),
    ("versions empty", entry_text(versions="{}"), "versions", "non-empty table"),
    ("version not a string", entry_text(versions="{ torch = 2.13 }"), "versions", "must be a specifier string"),
    ("bad specifier", entry_text(versions='{ torch = ">>2.13" }'), "versions", "not a PEP 440 specifier set"),
    (
        "unknown kind",
        entry_text(kind='"wrong"'),
        "kind",
        "valid: wrong-result, wrong-with-fewer-threads, wrong-when-reused-across-sizes, raises, refuses, any",
    ),
    ("unknown cpu", entry_text(cpu='"avx3"'), "cpu", "unknown CPU capability 'avx3'; valid: default, avx2"),
    ("unknown device", entry_text(device='"gpu"'), "device", "unknown device 'gpu'; valid: cpu, cuda"),
    ("candidate not a name", entry_text(candidates='["triton mm"]'), "candidates", "e.g. triton_mm_persistent_tma_*"),
    ("candidates empty", entry_text(candidates="[]"), "candidates", "non-empty list"),
    ("empty reason", entry_text(reason='""'), "reason", "non-empty string"),
    ("bad id", entry_text(id='"two words"'), "id", "an id of letters"),
    ("link to no file", entry_text(link='"docs/missing.md#x"'), "link", "not a file relative to"),
    ("link other scheme", entry_text(link='"ftp://example.org/x"'), "link", "neither an http(s) URL"),
]


@pytest.mark.parametrize("text,key,fix", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_a_malformed_entry_is_one_line_naming_file_entry_and_key(tmp_path, text, key, fix):
    path = write(tmp_path, text)
    with pytest.raises(GemmUsageError) as info:
        kn.load(path, NAMES)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: entry 1")
    if "id =" in text and 'id = "two words"' not in text:
        assert "(id 'e1')" in message
    assert f"key {key!r}" in message
    assert fix in message


def test_a_duplicate_id_names_both_entries(tmp_path):
    path = write(tmp_path, entry_text() + entry_text())
    with pytest.raises(GemmUsageError, match=r"entry 2 \(id 'e1'\): key 'id': duplicate of entry 1") as info:
        kn.load(path, NAMES)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "text,fragment",
    [
        ('title = "x"\n' + entry_text(), "unknown top-level key 'title'"),
        ("[known]\nid = 'x'\n", "'known' must be an array of tables"),
        ("known = [1, 2]\n", "'known' must be an array of tables"),
    ],
    ids=["top-level key", "table not array", "array of numbers"],
)
def test_a_malformed_document_is_one_line(tmp_path, text, fragment):
    path = write(tmp_path, text)
    with pytest.raises(GemmUsageError, match=re.escape(fragment)) as info:
        kn.load(path, NAMES)
    assert str(info.value).startswith(path) and "\n" not in str(info.value)


def test_a_toml_syntax_error_gives_file_and_line(tmp_path):
    path = write(tmp_path, entry_text() + "\n[[known]\nid = 'x'\n")
    with pytest.raises(GemmUsageError) as info:
        kn.load(path, NAMES)
    line = entry_text().count("\n") + 2  # the broken header, after the blank line
    assert str(info.value).startswith(f"{path}:{line}: TOML syntax error: ")
    assert "\n" not in str(info.value)


def test_an_unterminated_string_points_at_the_end_and_bytes_that_are_not_utf8_are_named(tmp_path):
    path = write(tmp_path, 'a = 1\nb = "open\n')
    with pytest.raises(GemmUsageError, match=r":2: TOML syntax error"):
        kn.load(path, NAMES)
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b"# caf\xe9\n")
    with pytest.raises(GemmUsageError, match="not UTF-8"):
        kn.load(str(bad), NAMES)
    with pytest.raises(GemmUsageError, match="cannot read the known-failures file"):
        kn.load(str(tmp_path / "absent.toml"), NAMES)


def test_the_default_vocabulary_is_gemmguards_own(tmp_path):
    names = kn.default_names()
    assert "cpp" in names.backends and "cutedsl[quack]" in names.backends
    assert "scaled_mm" in names.ops and "tf32" in names.dtypes and "noncontiguous" in names.layouts
    path = write(tmp_path, entry_text(layouts='["noncontiguous"]', dtypes='["tf32"]'))
    assert kn.load(path).entries[0].layouts == ("noncontiguous",)  # NAMES above would reject both
    with pytest.raises(GemmUsageError, match="unknown layout 'strided'"):
        kn.load(write(tmp_path, entry_text(layouts='"strided"'), "b.toml"))


# ---------------------------------------------------------------- matching


def one_entry(tmp_path, **keys) -> kn.KnownFailures:
    return kn.load(write(tmp_path, entry_text(**keys)), NAMES)


@pytest.mark.parametrize(
    "keys,hit,miss",
    [
        (dict(backend='"cpp"'), {}, dict(backend="aten")),
        (dict(ops='["linear", "addmm"]'), {}, dict(case=case(op="mm"))),
        (dict(dtypes='"float32"'), {}, dict(case=case(dtype="bfloat16"))),
        (dict(layouts='"offset"'), {}, dict(case=case(layout="contiguous"))),
        (dict(values='["nan", "inf"]'), dict(case=case(values="inf")), dict(case=case(values="normal"))),
        (dict(epilogues='["none", "relu+cast"]'), {}, dict(case=case(epilogue="relu"))),
        (dict(m="5"), {}, dict(case=case(m=6))),
        (dict(k='">=128,<=160"'), {}, dict(case=case(k=161))),
        (dict(n='"%8!=0"'), {}, dict(case=case(n=16))),
        (dict(batch='">=2"'), dict(case=case(op="bmm", batch=2)), dict(case=case(op="bmm", batch=1))),
        (dict(versions='{ torch = ">=2.13,<2.14" }'), {}, dict(versions={"torch": "2.14.0"})),
        (dict(versions='{ torch = ">=2.13,<2.14" }'), {}, dict(versions={"torch": "2.12.1+cpu"})),
        (dict(versions='{ torch = ">=2.13,<2.14" }'), {}, dict(versions={"torch": "2.14.0.dev20261201+cpu"})),
        (dict(versions='{ triton = "" }'), dict(versions={"triton": "3.6.0"}), dict(versions={"triton": None})),
        (dict(kind='"wrong-result"'), {}, dict(kind="raises")),
        (dict(kind='"raises"'), dict(kind="raises"), dict(kind="wrong-result")),
        (dict(kind='"refuses"'), dict(kind="refuses"), dict(kind="raises")),
        (dict(route='"nvgemm"'), dict(route="nvgemm"), dict(route="quack")),
    ],
    ids=lambda v: "-".join(f"{k}={v[k]}" for k in v) or "base" if isinstance(v, dict) else None,
)
def test_each_condition_selects_its_cases(tmp_path, keys, hit, miss):
    kf = one_entry(tmp_path, **keys)
    base = dict(backend="cpp", case=case(), versions={"torch": "2.13.0+cpu", "triton": "3.6.0"}, kind="wrong-result")
    if "batch" in keys:
        base["case"] = case(op="bmm", batch=2)
    if "route" in keys:
        base["route"] = "nvgemm"
    kind_any = dict(kind='"any"')
    assert kn.match(kf, **{**base, **hit}) is kf.entries[0]
    assert kn.match(kf, **{**base, **miss}) is None
    if "kind" not in keys:  # kind "any" explains both failure kinds, and nothing else changes the verdict
        anykind = kn.load(write(tmp_path, entry_text(**keys, **kind_any), "any.toml"), NAMES)
        assert kn.match(anykind, **{**base, **hit, "kind": "raises"}) is not None


@pytest.mark.parametrize(
    "text,holds",
    [("==4", [4]), ("!=4", [0, 1, 2, 3, 5, 6]), ("<4", [0, 1, 2, 3]), ("<=4", [0, 1, 2, 3, 4]), (">4", [5, 6]),
     (">=4", [4, 5, 6]), ("%3==1", [1, 4]), ("%3!=1", [0, 2, 3, 5, 6]), (4, [4])],
)  # fmt: skip
def test_each_size_clause_at_its_boundary(text, holds):
    cond = kn.parse_size(text)
    assert [v for v in range(7) if cond(v)] == holds


def test_size_conditions():
    cond = kn.parse_size(">=2, <8, %2==1")
    assert [v for v in range(10) if cond(v)] == [3, 5, 7]
    assert [v for v in range(20) if kn.parse_size("%8!=0")(v)] == [v for v in range(20) if v % 8]
    assert kn.parse_size(1)(1) and not kn.parse_size(1)(2)
    assert kn.parse_size("!=4")(3) and not kn.parse_size("!=4")(4)
    with pytest.raises(ValueError):
        kn.parse_size("1..4")


def test_match_takes_only_real_failure_kinds(tmp_path):
    with pytest.raises(
        ValueError,
        match="kind must be one of wrong-result, wrong-with-fewer-threads, wrong-when-reused-across-sizes, raises, ",
    ):
        kn.match(one_entry(tmp_path), "cpp", case(), TORCH_213, "any")


def test_installed_versions_read_metadata_once():
    import torch

    versions = kn.installed_versions(["torch", "gemmguard-no-such-distribution"])
    assert versions == {"torch": dist_version("torch"), "gemmguard-no-such-distribution": None}
    assert versions["torch"] == torch.__version__
    kn._installed.cache_clear()
    kn.installed_versions(["torch"])
    kn.installed_versions(["torch"])
    assert kn._installed.cache_info().misses == 1


# ---------------------------------------------------------------- xfail and XPASS


def test_tracker_xfails_what_an_entry_explains_and_nothing_else(tmp_path):
    kf = one_entry(tmp_path, layouts='"offset"', dtypes='"float32"')
    tracker = kn.KnownTracker(kf, "cpp", TORCH_213)
    assert tracker.note_failure(case(), "wrong-result") is kf.entries[0]
    assert tracker.note_failure(case(layout="contiguous"), "wrong-result") is None  # a new defect
    assert tracker.note_failure(case(), "raises") is None  # the entry's case, but another kind of failure
    assert tracker.xfailed() == [kf.entries[0]] and tracker.xpassed() == []
    reason = tracker.xfail_reason()
    assert "e1 (1 example(s), e.g. linear 5×6×130 float32 offset epilogue=none)" in reason
    assert "https://example.org/1" in reason


def test_xpass_needs_matching_passes_and_no_matching_failure(tmp_path):
    kf = one_entry(tmp_path, layouts='"offset"')
    # No example of the entry's pattern ran: nothing to say about it (an unsupported example is never noted).
    idle = kn.KnownTracker(kf, "cpp", TORCH_213)
    idle.note_pass(case(layout="contiguous"))
    assert idle.xpassed() == []
    # Its cases ran and all passed: the bug no longer shows.
    fixed = kn.KnownTracker(kf, "cpp", TORCH_213)
    fixed.note_pass(case())
    fixed.note_pass(case(m=7))
    assert fixed.xpassed() == [kf.entries[0]]
    assert fixed.xpass_reason() == (
        "gemmguard: known failure no longer shows: e1 (2 matching example(s) passed; https://example.org/1); "
        f"remove or narrow it in {kf.path}"
    )
    # One of its cases still fails: it is still true, whatever else passed.
    still = kn.KnownTracker(kf, "cpp", TORCH_213)
    still.note_pass(case())
    still.note_failure(case(m=7), "wrong-result")
    assert still.xpassed() == [] and still.xfailed() == [kf.entries[0]]


def test_an_xpass_warns_once_a_session_and_not_after_the_entry_explained_a_failure(tmp_path):
    """On an H100 one run both xfailed a shipped entry (in one test) and warned it "no longer shows" (in another):
    within a session an entry's XPASS note comes once, and never once the entry was seen failing."""
    import warnings

    from pytest_gemmguard.errors import KnownFailureXPass

    kf = one_entry(tmp_path, layouts='"offset"')

    def finish(tracker, noted):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                tracker.finish(False, noted)
            except pytest.xfail.Exception:
                pass
        return [w for w in caught if issubclass(w.category, KnownFailureXPass)]

    def passing():
        tracker = kn.KnownTracker(kf, "cpp", TORCH_213)
        tracker.note_pass(case())
        return tracker

    noted: set[str] = set()
    assert len(finish(passing(), noted)) == 1
    assert finish(passing(), noted) == []  # the same entry, a second test: said once already
    failing = kn.KnownTracker(kf, "cpp", TORCH_213)
    failing.note_failure(case(), "wrong-result")
    seen_failing: set[str] = set()
    assert finish(failing, seen_failing) == [] and seen_failing == {"e1"}
    assert finish(passing(), seen_failing) == []  # it still shows in this session: no "no longer shows"
    assert len(finish(passing(), None)) == 1  # without a session's record, each test says it (as before)


def test_a_shipped_entry_that_did_not_show_is_a_results_line_not_a_warning(tmp_path):
    """A shipped entry strikes some cases of its class, or some CPUs (torch-cpp-offset-frozen-weight-f16: wrong on an
    AMD EPYC, right on an Intel Xeon): a test whose matching examples passed once said nothing about a fix, yet
    warned every fresh run to tell the maintainers. Now the session sums each shipped entry's examples and the results
    section names one that never failed, with its evidence of where it was right; --gemm-known-strict still fails."""
    import warnings

    from pytest_gemmguard.errors import KnownFailureFixed, KnownFailureXPass
    from pytest_gemmguard.report.table import known_lines
    from pytest_gemmguard.report.tally import Tally

    text = entry_text(layouts='"offset"', seen_right='["mm 5×1×31 float16 offset (Intel Xeon)"]')
    shipped = kn.load(write(tmp_path, text), NAMES, shipped=True)

    def ran(passes: int, failures: int) -> kn.KnownTracker:
        tracker = kn.KnownTracker(shipped, "cpp", TORCH_213)
        for _ in range(passes):
            tracker.note_pass(case())
        for _ in range(failures):
            tracker.note_failure(case(), "wrong-result")
        return tracker

    passing = ran(2, 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        passing.finish(False, set())
    assert not [w for w in caught if issubclass(w.category, KnownFailureXPass)]
    with pytest.raises(KnownFailureFixed, match="no longer shows: e1"):
        passing.finish(True, set())
    assert passing.seen() == [("cpp", "e1", "passed", 2)]

    # Summed over the session's tests, as pytest-xdist's controller sums the workers' shares.
    entries = {e.id: e for e in shipped.entries}
    session, tally = Tally(), Tally()
    for tracker in (passing, ran(1, 0)):
        before = session.snapshot()
        session.note_known(tracker.seen())
        tally.add_share(session.since(before))
    assert known_lines(tally, entries) == [
        "cpp: shipped known failure e1 did not show here (3 matching examples passed, none failed; seen right "
        "before on mm 5×1×31 float16 offset (Intel Xeon)); if it never shows on torch >=2.13, it may be fixed: "
        "https://example.org/1"
    ]
    # Once it explained a failure anywhere in the session, the bug shows: no line.
    failed = ran(1, 1)
    with pytest.raises(pytest.xfail.Exception):
        failed.finish(False, set())
    tally.add_share({"known": [list(key) for key in failed.seen()]})
    assert known_lines(tally, entries) == []


def test_an_entry_of_the_users_own_file_still_warns_when_it_did_not_show(tmp_path):
    import warnings

    from pytest_gemmguard.errors import KnownFailureXPass

    tracker = kn.KnownTracker(one_entry(tmp_path, layouts='"offset"'), "cpp", TORCH_213)
    tracker.note_pass(case())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracker.finish(False, set())
    assert [str(w.message) for w in caught if issubclass(w.category, KnownFailureXPass)] == [tracker.xpass_reason()]
    assert tracker.seen() == []  # the user's own entries are the user's to narrow: the warning says where


@pytest.mark.parametrize("kind", ["wrong-with-fewer-threads", "wrong-when-reused-across-sizes"])
def test_a_crosscheck_entry_explains_only_its_kind_and_counts_only_passes_its_check_saw(tmp_path, kind):
    kf = one_entry(tmp_path, kind=f'"{kind}"')
    tracker = kn.KnownTracker(kf, "cpp", TORCH_213)
    assert tracker.note_failure(case(), "wrong-result") is None  # wrong as compiled for the case: another bug
    assert tracker.note_failure(case(), kind) is kf.entries[0]
    # A pass whose compiled code never ran that way (fewer threads, reused at another M) says nothing about this
    # bug: no XPASS from it, nor from a pass the other check saw.
    unseen = kn.KnownTracker(kf, "cpp", TORCH_213)
    unseen.note_pass(case(), also={k for k in kn.CROSSCHECK_KINDS if k != kind})
    assert unseen.xpassed() == []
    seen = kn.KnownTracker(kf, "cpp", TORCH_213)
    seen.note_pass(case(), also={kind})
    assert seen.xpassed() == [kf.entries[0]]


DEFAULT_SPACE_TEST = """
from pytest_gemmguard import gemm_case


@gemm_case()
def test_any_gemm(gemm):
    gemm.check()
"""


def test_the_shipped_onednn_entry_explains_atens_half_gemm_with_fewer_threads_and_only_under_the_check(pytester):
    """torch 2.13's CPU bf16/fp16 GEMM (oneDNN) is wrong when OpenMP gives it fewer threads, on AVX-512 CPUs
    (docs/findings.md; right on an AVX2 one). On such a CPU, --gemm-fewer-threads=all finds it on aten at a size
    past oneDNN's threshold and the shipped entry makes it xfail; without the shipped entries it fails, saying with
    how many threads; by default (auto) aten is not rerun. On any other CPU the same run passes and the entry, whose
    `cpu` is avx512, says nothing (no XPASS for a bug this CPU cannot have)."""
    import torch

    if torch.get_num_threads() < 2 or not sys.platform.startswith("linux"):
        pytest.skip("needs two threads and Linux's /proc")  # CI's machines have both
    pytester.makepyfile(ONEDNN_TEST)
    args = ("--gemm-backends=aten", "--gemm-seed=1", "-p", "no:cacheprovider", "-rxX")
    # The runs that must meet the bug start fresh processes, as a user's run is: in this xdist worker's own process,
    # after the tests before it, the fewer-threads run came out right in 2 of about 5 suite runs (never when the
    # test ran alone); whatever state of theirs hid the bug, a fresh process has none of it.
    known = pytester.runpytest_subprocess(*args, "--gemm-fewer-threads=all")
    if torch.backends.cpu.get_cpu_capability().lower() != "avx512":
        known.assert_outcomes(passed=1)
        assert "torch-onednn-half-gemm-fewer-threads" not in known.stdout.str()
        return
    known.assert_outcomes(xfailed=1)
    assert "torch-onednn-half-gemm-fewer-threads" in known.stdout.str()
    bare = pytester.runpytest_subprocess(
        *args, "--gemm-fewer-threads=all", "--gemm-known-shipped=off", "--gemm-verdicts=run.json"
    )
    bare.assert_outcomes(failed=1)
    assert "wrong with one thread per parallel region" in bare.stdout.str()
    # The record keeps the kind, and an entry proposed from it names it.
    proposed = subprocess.run(
        [sys.executable, "-m", "pytest_gemmguard", "propose", str(pytester.path / "run.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert 'kind = "wrong-with-fewer-threads"' in proposed.stdout, proposed.stdout + proposed.stderr
    default = pytester.runpytest_inprocess(*args)
    default.assert_outcomes(passed=1)
    assert "torch-onednn-half-gemm-fewer-threads" not in default.stdout.str()  # no XPASS from unchecked passes


# bfloat16 and float16 GEMMs past oneDNN's size threshold (64³ and 33×17×9 were wrong on an AVX-512 CPU, eager too),
# with ordinary numbers: the bug is in the threads, not the values.
ONEDNN_TEST = """
from pytest_gemmguard import gemm_case


@gemm_case(ops=["mm"], dtypes=["bfloat16", "float16"], shapes=[(64, 64, 64), (33, 17, 9)], layouts=["contiguous"],
           epilogues=["none"], values=["normal"])
def test_half_gemms(gemm):
    gemm.check()
"""


def test_a_tracker_sees_only_entries_for_its_backend_and_versions(tmp_path):
    kf = one_entry(tmp_path, layouts='"offset"', versions='{ torch = ">=2.13,<2.14" }')
    for backend, versions in (("aten", TORCH_213), ("cpp", {"torch": "2.14.0"}), ("cpp", {})):
        tracker = kn.KnownTracker(kf, backend, versions)
        tracker.note_pass(case())
        assert tracker.entries == [] and tracker.xpassed() == []
        assert tracker.note_failure(case(), "wrong-result") is None
    # Without versions, the installed ones (this machine's torch is 2.13).
    assert kn.KnownTracker(kf, "cpp").versions == {"torch": dist_version("torch")}


# ---------------------------------------------------------------- the shipped file


@pytest.fixture(scope="module")
def shipped() -> kn.KnownFailures:
    return kn.load(SHIPPED)


def sweep_rows() -> list[dict]:
    with open(SWEEP) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def covered_passes(entries, rows) -> list[dict]:
    """Rows that passed but that an entry covers: a new bug there would be reported as this known one."""
    return [r for r in rows if r["verdict"] == "verified" and any(e.covers(GemmCase(**r["case"])) for e in entries)]


def test_the_shipped_cpp_entry_matches_the_readme_failure(shipped):
    for bad in (case(epilogue="gelu"), case()):
        entry = kn.match(shipped, "cpp", bad, TORCH_213, "wrong-result")
        assert entry is not None and entry.id == "torch-cpp-offset-frozen-weight"
    f16 = case(op="mm", m=10, n=1, k=1, dtype="float16")  # its own entry: right on some AVX-512 CPUs
    assert kn.match(shipped, "cpp", f16, TORCH_213, "wrong-result").id == "torch-cpp-offset-frozen-weight-f16"
    bf16_bmm = case(op="bmm", batch=2, m=7, n=3, k=5, dtype="bfloat16")
    assert kn.match(shipped, "cpp", bf16_bmm, TORCH_213, "wrong-result").id == "torch-cpp-offset-frozen-weight-bf16-bmm"


@pytest.mark.parametrize(
    "backend,gemm,versions,kind",
    [
        ("cpp", case(layout="contiguous"), TORCH_213, "wrong-result"),
        ("cpp", case(layout="transposed_b"), TORCH_213, "wrong-result"),
        ("aten", case(), TORCH_213, "wrong-result"),
        ("cpp", case(), {"torch": "2.10.0"}, "wrong-result"),  # before the bug was first seen
        ("cpp", case(), TORCH_213, "raises"),
        ("cpp", case(dtype="bfloat16"), TORCH_213, "wrong-result"),
        ("cpp", case(op="mm", dtype="bfloat16", m=10, n=1, k=1), TORCH_213, "wrong-result"),
    ],
    ids=["contiguous", "transposed_b", "aten", "torch-2.10", "raises", "bf16-linear", "bf16-mm"],
)
def test_the_shipped_cpp_entries_do_not_hide_other_failures(shipped, backend, gemm, versions, kind):
    assert kn.match(shipped, backend, gemm, versions, kind) is None


def test_the_shipped_cpp_fewer_threads_entry_is_torch_211_and_212_and_that_kind_only(shipped):
    """Inductor's CPP template skipped the blocks of missing OpenMP threads on torch 2.11 (the H100 host) and is right
    on 2.13: the entry explains a fewer-threads failure of any cpp case there, and nothing else."""
    seen = case(op="bmm", m=33, n=65, k=129, batch=5, dtype="bfloat16", layout="broadcast", epilogue="gelu+silu")
    torch_211 = {"torch": "2.11.0+cu130"}
    entry = kn.match(shipped, "cpp", seen, torch_211, "wrong-with-fewer-threads")
    assert entry is not None and entry.id == "torch-cpp-template-fewer-threads"
    assert kn.match(shipped, "cpp", case(op="mm", m=1, n=32, k=1), {"torch": "2.12.1"}, "wrong-with-fewer-threads")
    assert kn.match(shipped, "cpp", seen, TORCH_213, "wrong-with-fewer-threads") is None  # right on 2.13
    assert kn.match(shipped, "cpp", seen, torch_211, "wrong-result") is None  # wrong with every thread: not this
    assert kn.match(shipped, "aten", seen, torch_211, "wrong-with-fewer-threads") is None


SWEEP_AVX2 = os.path.join(ROOT, "tests", "data", "cpp_offset_sweep_avx2.jsonl")


def test_on_an_avx2_cpu_the_shipped_cpp_entries_are_exactly_its_measured_failures(shipped):
    # The second sweep (an AVX2-only CPU): bfloat16 mm/addmm/linear fail there too, and pass on AVX-512.
    with open(SWEEP_AVX2) as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    assert rows and {r["isa"] for r in rows} == {"avx2"} and {r["torch"] for r in rows} == {"2.13.0+cpu"}
    avx2 = {**TORCH_213, kn.CPU_FACT: "avx2"}
    entries = [e for e in shipped.entries if e.applies_to("cpp", avx2)]
    assert len(entries) == 4
    missed = [r["case"] for r in rows if r["verdict"] == "failed" and not any(
        e.covers(GemmCase(**r["case"])) for e in entries)]  # fmt: skip
    assert missed == [] and covered_passes(entries, rows) == []
    # The AVX2 entry is not in force on AVX-512, where the same bfloat16 cases passed (the sweep above).
    on_avx512 = [e.id for e in shipped.entries if e.applies_to("cpp", {**TORCH_213, kn.CPU_FACT: "avx512"})]
    assert "torch-cpp-offset-frozen-weight-bf16-avx2" not in on_avx512 and len(on_avx512) == 3


def test_a_tracker_reads_this_cpus_capability_only_when_an_entry_names_one(shipped):
    tracker = kn.KnownTracker(shipped, "cpp")
    assert tracker.versions[kn.CPU_FACT] == kn.cpu_capability() and tracker.versions[kn.CPU_FACT]
    without = kn.KnownFailures(SHIPPED, tuple(e for e in shipped.entries if not e.cpus))
    assert kn.CPU_FACT not in kn.KnownTracker(without, "cpp").versions


def test_an_entry_that_names_a_device_matches_only_a_backend_running_there(tmp_path):
    """`aten` is ATen's CPU code on a machine without a GPU and cuBLAS on one with: an entry for a bug of one must
    not explain a failure of the other (the GPU machine's host CPU is AVX-512 too)."""
    (entry,) = one_entry(tmp_path, backend='"aten"', device='"cpu"').entries
    assert entry.applies_to("aten", {**TORCH_213, kn.DEVICE_FACT: "cpu"})
    assert not entry.applies_to("aten", {**TORCH_213, kn.DEVICE_FACT: "cuda"})
    assert not entry.applies_to("aten", TORCH_213)  # where the device is not known, a device entry never matches
    here = kn.KnownTracker(kn.load(write(tmp_path, entry_text(device='"cpu"')), NAMES), "cpp")
    assert here.versions[kn.DEVICE_FACT] == "cpu"  # cpp's kernels run on the CPU on every machine
    assert kn.DEVICE_FACT not in kn.KnownTracker(one_entry(tmp_path), "cpp").versions  # read only when named
    assert kn.backend_device("no-such-backend") is None


ONEDNN_LEAK_TEST = """
from pytest_gemmguard import gemm_case


@gemm_case(
    ops=["mm"], dtypes=["bfloat16"], layouts=["contiguous"], values=["inf"], shapes=[(64, 40, 33)], max_examples=12
)
def test_specials(gemm):
    gemm.check()
"""


def test_the_onednn_amx_bf16_nan_leak_is_xfail_on_aten_where_it_shows_and_cpp_stays_right(pytester):
    """oneDNN's AMX bf16 matmul (torch 2.13) turns the row next to an inf or NaN row of A into NaN where K is not a
    multiple of 32 (uxlfoundation/oneDNN#5717): the default space's NaN/inf cases made a clean run red on such a CPU.
    Where eager shows it here, aten is xfail with the shipped entry (and fails without the shipped entries); where it
    does not (a CPU without AMX), aten passes. Inductor's CPP template is right either way."""
    import torch

    from pytest_gemmguard import oracle

    def leaks(seed: int) -> bool:  # K = 33: A's inf leaks for 2 in 3 places of it on such a CPU, so 12 examples see it
        case = GemmCase("mm", 64, 40, 33, dtype="bfloat16", layout="contiguous", values="inf", seed=seed)
        inputs = build_inputs(case, "cpu")
        expected, _tol = oracle.case_reference(case, inputs)
        a, b = inputs.args
        return bool((torch.isnan(a @ b) & ~torch.isnan(expected)).any())

    pytester.makepyfile(ONEDNN_LEAK_TEST)
    args = ("--gemm-backends=aten,cpp", "--gemm-seed=1", "-p", "no:cacheprovider", "-rxX")
    result = pytester.runpytest_inprocess(*args)
    if not any(leaks(seed) for seed in range(12)):
        result.assert_outcomes(passed=2)
        return
    result.assert_outcomes(passed=1, xfailed=1)
    assert re.search(r"XFAIL \S+::test_specials\[aten\]", result.stdout.str())
    assert "onednn-amx-bf16-k-tail-nan-leak" in result.stdout.str()
    bare = pytester.runpytest_inprocess(*args, "--gemm-known-shipped=off")
    bare.assert_outcomes(passed=1, failed=1)


def test_the_shipped_cpp_entries_are_exactly_the_measured_failures(shipped):
    rows = sweep_rows()
    assert rows and {r["torch"] for r in rows} == {"2.13.0+cpu"}
    entries = [e for e in shipped.entries if e.applies_to("cpp", TORCH_213)]
    assert len(entries) == 3
    missed = [
        r["case"]
        for r in rows
        if r["verdict"] == "failed" and not any(e.covers(GemmCase(**r["case"])) for e in entries)
    ]
    assert missed == []  # every measured failure is explained...
    assert covered_passes(entries, rows) == []  # ...and no measured pass is covered
    assert sum(r["verdict"] == "verified" for r in rows) > 50  # enough passes for that to mean something


@pytest.mark.parametrize(
    "widen",
    [dict(dtypes=None), dict(layouts=None), dict(ops=None), dict(dtypes=("float32", "float16", "bfloat16"))],
    ids=["any-dtype", "any-layout", "any-op-bf16-entry", "bf16-added"],
)
def test_a_too_wide_cpp_entry_is_caught(shipped, widen):
    # The plant: widen one shipped entry; the tightness check must show passing cases it would cover.
    by_id = {e.id: e for e in shipped.entries}
    target = "torch-cpp-offset-frozen-weight-bf16-bmm" if "ops" in widen else "torch-cpp-offset-frozen-weight"
    wide = replace(by_id[target], **widen)
    entries = [wide if e.id == target else e for e in shipped.entries if e.applies_to("cpp", TORCH_213)]
    hidden = covered_passes(entries, sweep_rows())
    assert hidden, "the widened entry covers no measured pass: the tightness check cannot fail"
    # And what that means for a run: a new wrong result on such a case would be xfailed, not failed.
    victim = GemmCase(**hidden[0]["case"])
    wide_tracker = kn.KnownTracker(kn.KnownFailures(SHIPPED, tuple(entries)), "cpp", TORCH_213)
    assert wide_tracker.note_failure(victim, "wrong-result") is wide
    assert kn.KnownTracker(shipped, "cpp", TORCH_213).note_failure(victim, "wrong-result") is None


NVGEMM_VERSIONS = {"torch": "2.11.0+cu130", "nvidia-cutlass-dsl": "4.8.1"}


def test_the_shipped_nvgemm_entries_are_the_observed_cases(shipped):
    # The refusals seen on the H200 (docs/findings.md). Four: K not a multiple of 8, A row-major, 16-bit.
    one = case(op="mm", m=1, n=1, k=1, dtype="bfloat16", layout="contiguous")
    seen = [
        one,
        replace(one, m=16),
        case(op="mm", m=108, n=1440, k=1, dtype="bfloat16", layout="transposed_b"),
        case(op="mm", m=1, n=1, k=1866, dtype="float16", layout="transposed_b", epilogue="sigmoid+silu+scale"),
    ]
    for c in seen:
        entry = kn.match(shipped, "cutedsl", c, NVGEMM_VERSIONS, "raises", route="nvgemm")
        assert entry is not None and entry.id == "torch-nvgemm-k-not-multiple-of-8-raises", c
    # 2026-12-03: a 1x1 output with K a multiple of 8, C named: its own entry
    output = case(op="mm", m=1, n=1, k=3584, dtype="bfloat16", layout="noncontiguous")
    entry = kn.match(shipped, "cutedsl", output, NVGEMM_VERSIONS, "raises", route="nvgemm")
    assert entry is not None and entry.id == "torch-nvgemm-1x1-output-raises"
    # 2026-12-05 (H100): a 63x1 output, C's M named: N = 1 with M not a multiple of 8, the same entry
    column = case(op="mm", m=63, n=1, k=3040, dtype="float16", layout="transposed_b", epilogue="tanh+silu+sigmoid")
    entry = kn.match(shipped, "cutedsl", column, NVGEMM_VERSIONS, "raises", route="nvgemm")
    assert entry is not None and entry.id == "torch-nvgemm-1x1-output-raises"
    for wider in (replace(output, m=8), replace(output, n=2), replace(output, op="bmm", batch=2)):
        assert kn.match(shipped, "cutedsl", wider, NVGEMM_VERSIONS, "raises", route="nvgemm") is None, wider
    # 2026-12-03: K = 1 and M not a multiple of 8 refused whatever A's layout, A named (M-major and strided As)
    k1 = case(op="mm", m=1, n=83, k=1, dtype="bfloat16", layout="transposed_ab", epilogue="bias")
    for c in (k1, case(op="mm", m=13, n=608, k=1, dtype="bfloat16", layout="transposed_a", epilogue="scale"),
              case(op="mm", m=1, n=127, k=1, dtype="bfloat16", layout="noncontiguous")):  # fmt: skip
        entry = kn.match(shipped, "cutedsl", c, NVGEMM_VERSIONS, "raises", route="nvgemm")
        # A strided A with K = 1 fits the K entry as well (A runs along K): either explains it
        ids = {"torch-nvgemm-k1-m-not-multiple-of-8-raises"}
        if c.layout == "noncontiguous":
            ids.add("torch-nvgemm-k-not-multiple-of-8-raises")
        assert entry is not None and entry.id in ids, c
    for unseen in (
        replace(k1, m=16),  # K = 1, M a multiple of 8 (at 16x1x1 contiguous B was named, the K entry's case)
        replace(k1, k=64),  # an M-major A with K > 1
        replace(k1, m=16, n=1, layout="offset"),  # B 1x1 outside the K entry's layouts
        replace(k1, dtype="float32"),
        replace(k1, op="bmm", batch=2),
    ):
        assert kn.match(shipped, "cutedsl", unseen, NVGEMM_VERSIONS, "raises", route="nvgemm") is None, unseen
    aligned = case(op="mm", m=13, n=13, k=8, dtype="bfloat16", layout="contiguous")
    # K = 1 as at 16x1x1 (seen refused), but no operand 1x1: what the K entry alone must meet
    tall = replace(one, m=16, n=16)
    misses = [
        ("cutedsl", one, NVGEMM_VERSIONS, "raises", "quack"),  # another route's failure is another bug
        ("cutedsl", one, NVGEMM_VERSIONS, "wrong-result", "nvgemm"),
        ("cutedsl", aligned, NVGEMM_VERSIONS, "raises", "nvgemm"),  # K a multiple of 8: M and N never named
        ("cutedsl", replace(tall, layout="transposed_a"), NVGEMM_VERSIONS, "raises", "nvgemm"),  # M-major A, M = 16
        ("cutedsl", replace(tall, layout="offset"), NVGEMM_VERSIONS, "raises", "nvgemm"),
        ("cutedsl", replace(tall, dtype="float32"), NVGEMM_VERSIONS, "raises", "nvgemm"),
        ("cutedsl", replace(tall, op="bmm", batch=2), NVGEMM_VERSIONS, "raises", "nvgemm"),
        ("cutedsl", one, {"torch": "2.11.0+cu130"}, "raises", "nvgemm"),  # the DSL not installed
        ("cutedsl", one, {**NVGEMM_VERSIONS, "torch": "2.10.0+cu128"}, "raises", "nvgemm"),
        ("triton", one, NVGEMM_VERSIONS, "raises", None),
    ]
    for args in misses:
        assert kn.match(shipped, *args) is None, args


H200_211 = {"torch": "2.11.0+cu130", "nvidia-cutlass": "4.2.0.0"}


def test_the_shipped_gpu_entries_cover_the_observed_cases_and_no_more(shipped):
    # The H200 findings of 2026-12-02 (docs/findings.md): each entry explains what was seen, and a neighbour
    # that was not seen stays a failure, so a new bug there cannot hide behind a known one.
    fault = case(op="linear", m=64, n=48, k=96, dtype="bfloat16", layout="offset", epilogue="residual+cast")
    again = case(op="mm", m=64, n=48, k=96, dtype="float16", layout="offset", epilogue="cast")  # 21:45
    third = case(op="mm", m=61, n=160, k=96, dtype="bfloat16", layout="offset", epilogue="sigmoid+bias+residual")
    addmm = case(op="addmm", m=1152, n=176, k=3840, dtype="float16", layout="offset", epilogue="gelu+residual")  # H100
    for seen in (fault, again, third, addmm):
        entry = kn.match(shipped, "cutlass", seen, H200_211, "raises")
        assert entry is not None and entry.id == "torch-cutlass-offset-misaligned", seen
    misses = [
        ("cutlass", fault, H200_211, "wrong-result"),  # it faulted; a wrong value is another bug
        ("cutlass", replace(fault, dtype="float32"), H200_211, "raises"),
        ("cutlass", replace(again, op="bmm", batch=2), H200_211, "raises"),
        ("cutlass", replace(fault, layout="contiguous"), H200_211, "raises"),
        # 2026-12-05: verified by a CUTLASS kernel (odd K: only 2-byte-aligned kernels fit)
        ("cutlass", case(op="linear", m=400, n=71, k=4095, dtype="float16", layout="offset"), H200_211, "raises"),
        ("cutlass", fault, {**H200_211, "nvidia-cutlass": "4.1.0"}, "raises"),
        ("triton", fault, H200_211, "raises"),
    ]
    for args in misses:
        assert kn.match(shipped, *args) is None, args


def test_the_shipped_strided_row_entry_is_the_linear_seen_and_no_more(shipped):
    # 2026-12-05 (docs/findings.md): linear 1x528x1100 bfloat16 noncontiguous raised in every run, alone too.
    seen = case(op="linear", m=1, n=528, k=1100, dtype="bfloat16", layout="noncontiguous", epilogue="none")
    entry = kn.match(shipped, "cutlass", seen, H200_211, "raises")
    assert entry is not None and entry.id == "torch-cutlass-linear-one-strided-row-raises"
    assert kn.match(shipped, "cutlass", replace(seen, n=16, k=8, epilogue="gelu"), H200_211, "raises") is entry
    misses = [
        ("cutlass", seen, H200_211, "wrong-result"),  # it raised; a wrong value is another bug
        ("cutlass", replace(seen, m=2), H200_211, "raises"),
        ("cutlass", replace(seen, dtype="float16"), H200_211, "raises"),
        ("cutlass", replace(seen, op="mm"), H200_211, "raises"),
        ("cutlass", replace(seen, layout="transposed_a"), H200_211, "raises"),
        ("cutlass", seen, {**H200_211, "torch": "2.10.0"}, "raises"),
        ("triton", seen, H200_211, "raises"),
    ]
    for args in misses:
        assert kn.match(shipped, *args) is None, args


TMA = ("triton_mm_persistent_tma_18", "triton_mm_persistent_tma_19", "triton_mm_persistent_tma_20")


def test_the_shipped_triton_m1_entry_explains_its_templates_and_nothing_else(shipped):
    # Every case the H200 showed (2026-12-01 night, 2026-12-02 q1, r1 and the README main job, 2026-12-04 o6):
    # losing persistent TMA candidates confirmed wrong, the winner right.
    seen = [case(op="addmm", m=1, n=215, k=16, layout="transposed_b"),
            case(op="addmm", m=1, n=3, k=4096, dtype="float16", layout="transposed_b"),
            case(op="addmm", m=1, n=16, k=16, layout="contiguous"),
            case(op="addmm", m=1, n=65, k=1856, layout="transposed_ab", epilogue="tanh+sigmoid"),
            case(op="addmm", m=1, n=129, k=2336, dtype="bfloat16", layout="transposed_b", epilogue="scale"),
            case(op="mm", m=1, n=864, k=864, dtype="bfloat16", layout="noncontiguous"),  # blamed (confirm.blame)
            case(op="mm", m=1, n=490, k=256, dtype="tf32", layout="contiguous", epilogue="cast+sigmoid+bias"),
            case(op="mm", m=1, n=942, k=912, dtype="tf32", layout="transposed_ab", epilogue="tanh+residual"),
            case(op="mm", m=1, n=129, k=2336, dtype="bfloat16", layout="transposed_b", epilogue="scale")]  # fmt: skip
    for c in seen:
        entry = kn.match(shipped, "triton", c, H200_211, "wrong-result", candidates=TMA)
        assert entry is not None and entry.id == "triton-mm-templates-m1", c
    # H100, 2026-12-05 (gpu_seeds.sh, seed 880204): three small-tile configs of the plain mm template, each wrong
    # compiled alone, the winner right.
    plain = case(op="addmm", m=1, n=16, k=199, dtype="float16", layout="transposed_b", epilogue="relu")
    names = ("triton_mm_192", "triton_mm_194", "triton_mm_200")
    assert kn.match(shipped, "triton", plain, H200_211, "wrong-result", candidates=names).id == entry.id
    assert kn.match(shipped, "triton", plain, H200_211, "wrong-result", candidates=(*names, *TMA)).id == entry.id
    mm = seen[-1]
    misses = [
        (mm, H200_211, None),  # a wrong winner nothing blamed: a failure to look at
        (mm, H200_211, ()),
        (mm, H200_211, (*TMA, "extern_kernels.mm")),  # another kind of candidate wrong beside them
        (mm, H200_211, ("triton_scaled_mm_7",)),  # another template
        (mm, H200_211, ("triton_mm_persistent_tma",)),  # the pattern wants the candidate's number
        (replace(mm, m=2), H200_211, TMA),
        (replace(mm, n=1), H200_211, TMA),
        (replace(mm, layout="offset"), H200_211, TMA),  # not seen with the template
        (replace(mm, op="bmm", batch=2), H200_211, TMA),
        (replace(mm, dtype="float8_e4m3fn", op="scaled_mm"), H200_211, TMA),
        (mm, {"torch": "2.10.0"}, TMA),
    ]
    for c, versions, names in misses:
        assert kn.match(shipped, "triton", c, versions, "wrong-result", candidates=names) is None, (c, names)
    assert kn.match(shipped, "aten", mm, H200_211, "wrong-result", candidates=TMA) is None


def test_an_entry_that_names_candidates_explains_only_candidate_failures_of_those_names(tmp_path):
    path = write(tmp_path, entry_text(candidates='["tma_*", "extern_kernels.slow_?"]', kind='"any"'))
    (entry,) = kn.load(path, NAMES).entries
    assert entry.explains("wrong-result", ["tma_1", "extern_kernels.slow_a"])
    assert entry.explains("wrong-result", ("tma_12",))
    for names in (None, (), ["tma_1", "triton_mm_3"], ["extern_kernels.slow_ab"], ["xtma_1"]):
        assert not entry.explains("wrong-result", names), names
    assert not entry.explains("raises")  # a crash names no wrong candidate
    tracker = kn.KnownTracker(kn.load(path, NAMES), "cpp", {"torch": "2.13.0"})
    c = case()
    assert tracker.note_failure(c, "wrong-result") is None
    assert tracker.note_failure(c, "wrong-result", candidates=["tma_3"]).id == entry.id


def test_an_entry_that_names_candidates_is_xpass_only_where_they_ran_and_were_right(tmp_path):
    # A pass where autotuning never offered the template says nothing about its bug: no XPASS from it.
    known = kn.load(write(tmp_path, entry_text(candidates='"tma_*"')), NAMES)
    plain = kn.load(write(tmp_path, entry_text(), "plain.toml"), NAMES)
    for judged, xpass in (((), False), (("triton_mm_3",), False), (("triton_mm_3", "tma_7"), True)):
        tracker = kn.KnownTracker(known, "cpp", {"torch": "2.13.0"})
        tracker.note_pass(case(), judged=judged)
        assert bool(tracker.xpassed()) == xpass, judged
        other = kn.KnownTracker(plain, "cpp", {"torch": "2.13.0"})  # an entry without candidates: any pass
        other.note_pass(case(), judged=judged)
        assert other.xpassed() == list(plain.entries)


def test_at_1x1x1_the_dense_layouts_are_the_same_tensors():
    # Why the NVGEMM entry may list four layouts for one observed case: their inputs are identical.
    from pytest_gemmguard.cases.case import build_inputs

    def inputs(layout):
        args = build_inputs(case(op="mm", m=1, n=1, k=1, dtype="bfloat16", layout=layout), "cpu").args
        return [(tuple(t.shape), t.stride(), t.storage_offset(), t.float().tolist()) for t in args]

    dense = [inputs(lay) for lay in ("contiguous", "transposed_a", "transposed_b", "transposed_ab")]
    assert all(d == dense[0] for d in dense)
    assert inputs("noncontiguous") != dense[0] and inputs("offset") != dense[0]


def _github_anchor(heading: str) -> str:
    # GitHub's heading ids: lower case, punctuation and symbols dropped, each space a hyphen.
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_shipped_links_point_at_real_findings(shipped):
    with open(os.path.join(ROOT, "docs", "findings.md")) as fh:
        anchors = {_github_anchor(line[3:]) for line in fh if line.startswith("## ")}
    # Every shipped link is public: an upstream issue, or the published write-up of a heading that exists.
    for entry in shipped.entries:
        target, _, anchor = entry.link.partition("#")
        assert target == PUBLISHED_FINDINGS and anchor in anchors, entry.link


PUBLISHED_FINDINGS = "https://github.com/gemmguard/gemmguard/blob/main/docs/findings.md"


# ---------------------------------------------------------------- a real compile


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="the CPP backend needs g++")
def test_the_real_cpp_failure_is_explained_and_its_contiguous_twin_is_not_counted(shipped, tmp_path):
    from pytest_gemmguard.compile.compiler import Compiler
    from pytest_gemmguard.errors import GemmMismatch
    from pytest_gemmguard.run.gemm import Gemm
    from pytest_gemmguard.run.session import GemmSession, Options

    if dist_version("torch").split("+")[0] != "2.13.0":
        pytest.skip("the CPP offset bug was measured on torch 2.13.0")
    compiler = Compiler(cache_dir=str(tmp_path / "cache"))
    compiler.activate()
    session = GemmSession(compiler, Options(repro_dir=str(tmp_path / "repro")))
    tracker = kn.KnownTracker(shipped, "cpp")  # the installed versions
    bad = case(epilogue="gelu")
    try:
        with pytest.raises(GemmMismatch):
            Gemm(bad, "cpp", session).check()
        assert tracker.note_failure(bad, "wrong-result").id == "torch-cpp-offset-frozen-weight"
        Gemm(replace(bad, layout="contiguous"), "cpp", session).check()
        tracker.note_pass(replace(bad, layout="contiguous"))
    finally:
        compiler.deactivate()
    assert tracker.passes == {} and tracker.xpassed() == []
    assert [e.id for e in tracker.xfailed()] == ["torch-cpp-offset-frozen-weight"]


def test_the_shipped_triton_entry_covers_the_h200_finding_and_nothing_beside_it(shipped):
    torch_211 = {"torch": "2.11.0+cu130"}
    found = GemmCase("mm", 1, 1, 1, dtype="float32", layout="noncontiguous", seed=11)
    assert kn.match(shipped, "triton", found, torch_211, "wrong-result").id == "triton-mm-1x1x1-strided"
    addmm = GemmCase("addmm", 1, 1, 1, dtype="bfloat16", layout="noncontiguous")
    assert kn.match(shipped, "triton", addmm, torch_211, "wrong-result").id == "triton-mm-1x1x1-strided"
    # A neighbour that passed there, another layout, another torch, another backend: a new defect, not this one.
    for backend, other, versions in (
        ("triton", GemmCase("mm", 1, 1, 8, dtype="float32", layout="noncontiguous"), torch_211),
        ("triton", GemmCase("mm", 1, 1, 1, dtype="float32", layout="contiguous"), torch_211),
        ("triton", found, {"torch": "2.10.0"}),
        ("aten", found, torch_211),
    ):
        assert kn.match(shipped, backend, other, versions, "wrong-result") is None, (backend, other, versions)


# ---------------------------------------------------------------- a known crash that loses the CUDA context

# Stands in for a kernel that faults: on a GPU such an error leaves the process's CUDA context unusable.
LOST_CONTEXT = plants.planted_backend(
    "faulty",
    plants.graph_pass(
        "Fault",
        """
        with open("compiles.txt", "a") as fh:
            fh.write("compile\\n")
        raise RuntimeError("CUDA error: misaligned address (planted)")
        """,
    ),
)

LOST_CONTEXT_TEST = """
from pytest_gemmguard import gemm_case


@gemm_case(ops=["mm"], dtypes=["float32"], layouts=["contiguous"], epilogues=["none"],
           shapes=[(8, 8, 8), (16, 8, 8), (8, 16, 8)], max_examples=3)
def test_mm(gemm):
    gemm.check()
"""

LOST_CONTEXT_ENTRY = """
[[known]]
id = "planted-fault"
backend = "faulty"
ops = ["mm"]
versions = { torch = ">=2.0" }
kind = "raises"
link = "https://example.invalid/planted"
reason = "a planted fault"
"""


def test_a_known_crash_that_loses_the_cuda_context_is_xfail_and_ends_the_test(pytester):
    # A known "raises" entry explains the crash, but after a fatal CUDA error in the test process every later
    # example would fail for it and be blamed on its own case: the test ends there, as xfail.
    pytester.makeconftest(LOST_CONTEXT)
    pytester.makepyfile(test_lost=LOST_CONTEXT_TEST)
    pytester.makefile(".toml", known=LOST_CONTEXT_ENTRY)
    result = pytester.runpytest_inprocess("--gemm-backends=faulty", "--gemm-known=known.toml", "-v",
                                          "-p", "no:cacheprovider")  # fmt: skip
    result.assert_outcomes(xfailed=1)
    assert (pytester.path / "compiles.txt").read_text().count("compile") == 1, result.stdout.str()
    assert "the CUDA context is lost" in result.stdout.str()


# ---------------------------------------------------------------- shipped and user entries together


def test_a_users_entry_overrides_a_shipped_one_by_id_and_adds_its_own(tmp_path, shipped):
    path = write(tmp_path, GOOD_ENTRY + GOOD_ENTRY.replace('id = "good"', 'id = "torch-cpp-offset-frozen-weight"'))
    merged = kn.load(path, NAMES).merged_over(shipped)
    ids = [e.id for e in merged.entries]
    assert ids[:2] == ["good", "torch-cpp-offset-frozen-weight"] and ids.count("torch-cpp-offset-frozen-weight") == 1
    assert {e.id for e in merged.entries} == {"good"} | {e.id for e in shipped.entries}
    mine = merged.entries[1]
    assert not mine.shipped and mine.origin == path and mine.link == "https://example.org/bug/1"


def test_a_shipped_entry_needs_a_public_link(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "bug.md").write_text("# bug\n")
    path = write(tmp_path, GOOD_ENTRY.replace("https://example.org/bug/1", "docs/bug.md"))
    assert kn.load(path, NAMES).entries[0].link == "docs/bug.md"  # a user's file may point into its repository
    with pytest.raises(GemmUsageError, match="is not an http\\(s\\) URL; a shipped entry links"):
        kn.load(path, NAMES, shipped=True)


def test_a_failure_an_entry_fits_but_for_its_versions_is_named_in_the_report(tmp_path):
    kf = one_entry(tmp_path, layouts='"offset"', versions='{ torch = ">=2.13,<2.14" }')
    tracker = kn.KnownTracker(kf, "cpp", {"torch": "2.15.0"})
    assert tracker.note_failure(case(), "wrong-result") is None  # a failure: the bug may have changed
    line = tracker.near_miss(case(), "wrong-result")
    assert (
        "known failure e1 " in line
        and "for torch " in line
        and ">=2.13" in line
        and "<2.14" in line
        and "installed: torch 2.15.0" in line
    )
    assert tracker.near_miss(case(layout="contiguous"), "wrong-result") is None  # outside its pattern: nothing
    assert kn.KnownTracker(kf, "cpp", TORCH_213).near_miss(case(), "wrong-result") is None  # in range: no miss


def test_fused_names_every_epilogue_chain_but_none(tmp_path):
    kf = one_entry(tmp_path, epilogues='"fused"')
    (entry,) = kf.entries
    assert entry.covers(case(epilogue="gelu")) and entry.covers(case(epilogue="bias+relu+gelu"))
    assert not entry.covers(case(epilogue="none"))


def test_a_chain_then_plus_star_names_every_chain_that_begins_so(tmp_path):
    kf = one_entry(tmp_path, epilogues='["none", "bias+*", "relu+gelu+*"]')
    (entry,) = kf.entries
    for chain in ("none", "bias", "bias+gelu", "bias+relu+cast", "relu+gelu", "relu+gelu+cast"):
        assert entry.covers(case(epilogue=chain)), chain
    for chain in ("gelu", "gelu+bias", "relu", "relu+cast", "biasx", "scale+bias"):
        assert not entry.covers(case(epilogue=chain)), chain
    for bad in ('"bogus+*"', '"*"', '"+*"'):
        with pytest.raises(GemmUsageError, match="every chain that begins so"):
            one_entry(tmp_path, epilogues=bad)


def test_the_shipped_bf16_avx2_entry_leaves_out_chains_that_first_take_the_result_to_float32(shipped):
    """Seen right on AVX2 (torch 2.13.0 and 2.14.1): a bfloat16 offset case whose chain begins with gelu, silu or
    cast; seen wrong: every other beginning."""
    avx2 = {**TORCH_213, kn.CPU_FACT: "avx2"}

    def entry(chain):
        got = kn.match(shipped, "cpp", case(op="addmm", dtype="bfloat16", epilogue=chain), avx2, "wrong-result")
        return got.id if got is not None else None

    for chain in ("none", "relu", "bias+silu", "scale+gelu", "residual+gelu", "tanh+gelu", "sigmoid+silu"):
        assert entry(chain) == "torch-cpp-offset-frozen-weight-bf16-avx2", chain
    for chain in ("gelu", "gelu+silu", "silu+scale+residual", "cast", "cast+relu"):
        assert entry(chain) is None, chain


def test_evidence_keys_are_lists_of_case_descriptions(tmp_path):
    kf = one_entry(tmp_path, seen='["mm 1×2×3 float32 offset"]', seen_right='"mm 4×2×3 float32 offset"')
    (entry,) = kf.entries
    assert entry.seen == ("mm 1×2×3 float32 offset",) and entry.seen_right == ("mm 4×2×3 float32 offset",)
    with pytest.raises(GemmUsageError, match="key 'seen': must be a case description or a non-empty list"):
        one_entry(tmp_path, seen="[]")


NEAR_MISS_TEST = """
from pytest_gemmguard import gemm_case


@gemm_case(ops=["mm"], dtypes=["float32"], layouts=["contiguous"], epilogues=["none"], shapes=[(8, 16, 32)])
def test_mm(gemm):
    gemm.check()
"""

NEAR_MISS_ENTRY = """
[[known]]
id = "off-by-one-before-2.0"
backend = "aten"
ops = ["mm"]
versions = { torch = "<2.0" }
kind = "wrong-result"
link = "https://example.org/off-by-one"
reason = "every GEMM off by one (planted)"
"""


@pytest.mark.slow
def test_a_report_names_the_entry_that_fits_all_but_its_versions(pytester, plugin_args):
    pytester.makeconftest(plants.WRONG_ATEN)
    pytester.makepyfile(test_mm=NEAR_MISS_TEST)
    pytester.makefile(".toml", known=NEAR_MISS_ENTRY)
    result = pytester.runpytest_subprocess(
        *plugin_args,
        "-p",
        "no:cacheprovider",
        "--gemm-backends=aten",
        "--gemm-known=known.toml",
        "--gemm-compile-workers=0",
    )
    out = result.stdout.str()
    assert result.ret == 1 and "FAILED test_mm.py::test_mm[aten]" in out, out[-3000:]
    assert "known failure off-by-one-before-2.0 (entry in " in out and "but for torch <2.0" in out, out[-3000:]
    assert f"installed: torch {dist_version('torch')}" in out, out[-3000:]


def test_the_shipped_triton_refusal_entry_is_the_decompose_k_only_regime(shipped):
    # The H100's refusals (docs/findings.md): K at least 64 times M and N, where Inductor offers decompose-K alone.
    versions = {"torch": "2.11.0+cu130", "triton": "3.6.0"}
    seen = [
        case(op="mm", m=5, n=3, k=4093, dtype="bfloat16", layout="transposed_b", epilogue="gelu+silu", values="nan"),
        case(op="mm", m=3, n=3, k=511, dtype="bfloat16", layout="offset"),
        case(op="linear", m=1, n=1, k=347, dtype="float32", layout="noncontiguous", epilogue="gelu"),
        case(op="linear", m=1, n=1, k=194, dtype="tf32", layout="aliased", epilogue="gelu"),
    ]
    for c in seen:
        entry = kn.match(shipped, "triton", c, versions, "refuses")
        assert entry is not None and entry.id == "torch-triton-decompose-k-only-no-split-refuses", c
    for other in (
        replace(seen[0], k=300),  # K < 64 M: the mm templates are offered
        replace(seen[0], n=64),  # K < 64 N
        replace(seen[0], op="bmm", batch=2),  # bmm has no decompose-K
    ):
        assert kn.match(shipped, "triton", other, versions, "refuses") is None, other
    assert kn.match(shipped, "triton", seen[0], versions, "wrong-result") is None  # only the refusal
    assert kn.match(shipped, "aten", seen[0], versions, "refuses") is None


def test_the_shipped_nvgemm_entries_take_the_h100_sightings(shipped):
    strided = case(op="mm", m=1, n=64, k=79, dtype="float16", layout="noncontiguous", epilogue="tanh+silu")
    entry = kn.match(shipped, "cutedsl", strided, NVGEMM_VERSIONS, "raises", route="nvgemm")
    assert entry is not None and entry.id == "torch-nvgemm-k-not-multiple-of-8-raises"
    shared = case(op="bmm", m=31, n=1, k=64, batch=4, dtype="float16", layout="broadcast", epilogue="scale+residual")
    entry = kn.match(shipped, "cutedsl", shared, NVGEMM_VERSIONS, "raises", route="nvgemm")
    assert entry is not None and entry.id == "torch-nvgemm-broadcast-b-n1-raises"
    for right in (replace(shared, layout="transposed_b"), replace(shared, n=3), replace(shared, m=5, n=3, k=4093)):
        assert kn.match(shipped, "cutedsl", right, NVGEMM_VERSIONS, "raises", route="nvgemm") is None, right


def test_a_size_condition_may_compare_with_a_multiple_of_another_size():
    cond = kn.parse_size(">=64*m,>=64*n,%2==1")
    assert cond(4093, case(m=5, n=3)) and not cond(4093, case(m=64, n=3)) and not cond(4094, case(m=5, n=3))
    with pytest.raises(ValueError, match="a multiple of another size"):
        kn.parse_size(">=64*q")
