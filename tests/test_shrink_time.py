"""Shrinking a failure is bounded (--gemm-shrink-time): each shrink step is a compile, seconds on a GPU, and
Hypothesis's own limit is five minutes per failing test. The failure must still be reported, with the
smallest case found by then, and the bound must be what stops it (a longer bound shrinks longer)."""

from __future__ import annotations

import re
import shutil
import time

from actrun import plants

# A backend that is wrong on every GEMM (a real Inductor graph pass adds 0.5 to each mm's output), and a
# test that costs 0.4 s per example beyond its compile: shrinking its failure takes Hypothesis many steps.
PLANT = plants.planted_backend("wrong-everywhere", plants.shift_gemms("SkewAll", 0.5, ops=("mm",)))

SLOW_WRONG = """
import os
import time
from pytest_gemmguard import gemm_case

@gemm_case(ops=["mm"], dtypes=["float32"], layouts=["contiguous"], epilogues=["none"], max_examples=20)
def test_always_wrong(gemm):
    with open(os.path.join(os.path.dirname(__file__), "examples.txt"), "a") as fh:
        fh.write("example\\n")
    time.sleep(0.4)
    gemm.check()
"""


def _run(pytester, plugin_args, limit: str):
    # Each run from scratch: a run resumes shrinking from the example database an earlier one left.
    shutil.rmtree(pytester.path / ".hypothesis", ignore_errors=True)
    (pytester.path / "examples.txt").unlink(missing_ok=True)
    pytester.makeconftest(PLANT)
    pytester.makepyfile(test_user=SLOW_WRONG)
    started = time.perf_counter()
    result = pytester.runpytest_subprocess(
        *plugin_args, "--gemm-backends=wrong-everywhere", "-p", "no:cacheprovider", "--gemm-seed=3",
        "--gemm-compile-workers=0", f"--gemm-shrink-time={limit}", timeout=600,
    )  # fmt: skip
    examples = len((pytester.path / "examples.txt").read_text().splitlines())
    return result, time.perf_counter() - started, examples


def test_shrinking_stops_at_its_limit_and_the_failure_is_still_reported(pytester, plugin_args):
    short, short_s, short_n = _run(pytester, plugin_args, "2")
    text = short.stdout.str()
    assert short.ret == 1, text[-3000:]
    assert "wrong result" in text.lower(), text[-3000:]
    assert "shrinking stopped at its 2 s limit (--gemm-shrink-time)" in text, text[-3000:]
    longer, longer_s, longer_n = _run(pytester, plugin_args, "20")
    assert longer.ret == 1, longer.stdout.str()[-3000:]
    # The limit is what stopped it: given more time the same failure shrinks further. Counted in examples
    # run, not in wall seconds (a loaded CI machine moved a whole run's time by more than the difference).
    assert longer_n >= short_n + 3, (short_n, longer_n, short_s, longer_s)


# Wrong only in bfloat16: the simplest draw (float32) passes, so a failure is found among later, richer draws.
WRONG_BF16 = plants.planted_backend(
    "wrong-bf16", plants.shift_gemms("SkewBf16", 1.0, when='node.meta["val"].dtype == torch.bfloat16')
)

LISTED_SHAPE = """
import os
from pytest_gemmguard import gemm_case

@gemm_case(shapes=[(64, 48, 96)], max_examples=30)
def test_listed(gemm):
    with open(os.path.join(os.path.dirname(__file__), "examples.txt"), "a") as fh:
        fh.write(gemm.case.dtype + "\\n")
    gemm.check()
"""


def test_a_failure_on_a_listed_shape_is_reported_as_found_not_shrunk(pytester):
    """Issue 41: 60 s went into shrinking a failure whose shape the test lists, where only the op, dtype, layout
    and epilogue could shrink (a compile a step). The draw that fails is reported as it was found: after it, only
    Hypothesis's one rerun of it for the report."""
    pytester.makeconftest(WRONG_BF16)
    pytester.makepyfile(test_listed=LISTED_SHAPE)
    args = ("--gemm-backends=wrong-bf16", "-p", "no:cacheprovider", "--gemm-seed=1", "--gemm-compile-workers=0")
    result = pytester.runpytest_inprocess(*args)
    text = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert "gemmguard: wrong-bf16 produced a wrong result" in text, text[-3000:]
    assert re.search(r"case: +\w+ 64×48×96 bfloat16 ", text), text[-3000:]  # the listed shape, as drawn
    ran = (pytester.path / "examples.txt").read_text().split()
    first = ran.index("bfloat16")
    assert len(ran) - first - 1 <= 1, ran  # with shrinking, seeded as here: 6 more examples (a compile each)
    assert "--gemm-replay=" in text
