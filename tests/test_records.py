"""The records that cross gemmguard's folders: a compile-ahead worker's reply (ahead/reply.py), a test's share of
the results table's counts (report/tally.py), and the `gemm` a test receives (run/gemm.py), which shows the case
and its API while the run's bookkeeping stays in its Example (run/example.py)."""

import json

import pytest

from pytest_gemmguard.ahead.reply import Reply
from pytest_gemmguard.cases.case import GemmCase
from pytest_gemmguard.report.tally import Tally
from pytest_gemmguard.run.gemm import Gemm, example_of


def test_a_worker_reply_reads_back_as_written_and_anything_else_is_refused():
    reply = Reply("unsupported", "no kernel", ({"name": "x", "wrong": True},), fn=True, settled=True, compile_s=1.5)
    assert Reply.from_json(json.loads(json.dumps(reply.to_json()))) == reply
    for line in ({"status": "maybe"}, {"detail": "no status"}, ["ok"]):
        with pytest.raises(ValueError, match="not a compile-ahead reply"):
            Reply.from_json(line)


def test_a_tests_share_of_the_counts_travels_by_name():
    tally = Tally()
    before = tally.snapshot()
    tally.of("aten").verified += 2
    tally.of("aten").compile_s += 1.5
    tally.note_unsupported("cpp", "no kernel of cpp ran")
    share = json.loads(json.dumps(tally.since(before)))  # as it travels on a pytest report
    table = Tally()
    table.add_share(share)
    table.add_share(share)
    assert (table.of("aten").verified, table.of("aten").compile_s, table.of("cpp").unsupported) == (4, 3.0, 2)
    assert table.reasons[("cpp", "no kernel of cpp ran")] == 2 and table.ran_anything()
    known = Tally()  # a run whose one example was a known failure (a replay of one) tested something
    known.note_unsupported("triton", "no valid choice")
    assert not known.ran_anything()
    known.of("triton").xfailed += 1
    assert known.ran_anything()
    with pytest.raises(AttributeError):  # a count nobody declared is an error, never a column of its own
        table.add_share({"counts": [["aten", "verifed", 1]]})


def test_the_gemm_a_test_receives_shows_the_case_and_its_api_only():
    gemm = Gemm(GemmCase("mm", 3, 5, 7), "aten", session=None, test_id="t.py::test_x[aten]")
    public = {name for name in dir(gemm) if not name.startswith("_")}
    fields = {"op", "m", "n", "k", "batch", "layout", "epilogue", "dtype"}
    assert public == {"case", "backend", "test_id", "device", "inputs", "args", "check", *fields}
    assert (gemm.m, gemm.n, gemm.k, gemm.device, gemm.args[0].shape) == (3, 5, 7, "cpu", (3, 7))
    example = example_of(gemm)  # the run's own record of the example: nothing checked yet
    assert (example.calls, example.checks, example.route, example.ahead, example.judged_right) == (0, 0, None, None, ())
