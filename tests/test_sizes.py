"""Which cases the dynamic-compile check takes (crosscheck/sizes.py): a share of the drawn ones, never one whose other
M would break the case."""

from dataclasses import replace

from hypothesis import given, settings

from pytest_gemmguard import backends
from pytest_gemmguard.cases.case import GemmCase
from pytest_gemmguard.cases.space import CaseSpace
from pytest_gemmguard.cases.strategies import cases_in
from pytest_gemmguard.crosscheck import other_size


def test_about_one_drawn_case_in_eight_is_also_compiled_dynamic_and_never_one_another_m_would_break():
    drawn = []

    @settings(max_examples=400, database=None, deadline=None, derandomize=True)
    @given(cases_in(CaseSpace(), "cpu"))
    def collect(case):
        drawn.append(case)

    collect()
    aten, cpp = backends.get("aten"), backends.get("cpp")
    taken = [c for c in drawn if other_size.takes(c, aten)]
    assert 0.04 < len(taken) / len(drawn) < 0.2, len(taken) / len(drawn)
    assert all(c.m >= 2 and c.layout != "aliased" and not c.op.startswith("scaled") for c in taken)
    assert all(c.m not in (c.n, c.k, c.batch) for c in taken)  # one symbol for equal sizes: a new M recompiles
    assert not any(other_size.takes(c, cpp) for c in drawn if c.op == "baddbmm")  # cpp freezes its M-sized bias
    # The same case always gets the same answer (a replay checks it again); another seed may not.
    case = next(c for c in taken)
    assert other_size.takes(replace(case), aten)
    assert any(not other_size.takes(replace(case, seed=s), aten) for s in range(20))


def test_the_other_m_is_never_one_and_never_the_same():
    for m in range(2, 5000):
        other = other_size.other_m(m)
        assert other >= 2 and other != m
    assert other_size.other_m(GemmCase("mm", 40, 8, 8).m) > 64  # a small M is run past its tiles
