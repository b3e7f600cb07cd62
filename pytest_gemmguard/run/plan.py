"""The plan of one test on one backend, made once per session: its cases' strategy, the regime tour, the example
budget, the explicit cases and the seed; with compile-ahead, the explore run's cases drawn beforehand (the same
seed and settings) and queued for the workers in the order the test will meet them."""

from __future__ import annotations

import dataclasses
import random
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck

from .. import backends
from .._compat import hypothesis as hypothesis_compat
from ..cases import big, strategies
from . import replay

if TYPE_CHECKING:
    from ..cases.case import GemmCase
    from ..cases.space import CaseSpace
    from .session import GemmSession

# Hypothesis settings every run of a test shares (its explore run, the explicit tour, the draw beforehand).
SHARED = dict(deadline=None, print_blob=True, suppress_health_check=list(HealthCheck))


@dataclasses.dataclass
class Plan:
    """What one test on one backend will run: its cases' strategy, the regime tour, the example budget, the
    explicit cases, the seed the explore run draws with, and how many cases it draws.

    Every explicit case runs exactly once: a draw that meets one runs it in the tour's place and Hypothesis
    draws another (`explore`), so the test runs `total` examples before any shrinking."""

    strategy: Any
    tour: list
    budget: int
    explicit: list
    run_seed: int | None
    harvested: bool  # exactly the harvested cases: no explore run
    draws: int = 0  # the cases the explore run draws (0: no explore run)
    drawn: list | None = None  # the explore run's cases, drawn beforehand (compile-ahead only)

    @property
    def explore_n(self) -> int:
        """The examples the explore run draws (none for harvested cases, nor where the listed ones fill the
        budget or are all the space has)."""
        return self.draws

    @property
    def total(self) -> int:
        """The examples the test runs before any shrinking (the progress line's count): the explicit cases and
        the draws, which is one more than the budget where the budget is 1 and nothing is listed."""
        return len(self.explicit) + self.draws


def plan(session: GemmSession, space: CaseSpace, backend: str, test_id: str) -> Plan:
    """The test's plan, made once per session (so the draw that compile-ahead queues at collection and the
    test's own run use the same seed).

    Every listed or harvested case runs, once, whatever the budget: it limits only what is drawn at random.
    Harvested cases are all the test runs. Listed shapes each come in the regime tour; where the space of
    listed shapes holds no more cases than the budget, all of them run and nothing is drawn. Without listed
    shapes the tour takes the budget less one, and Hypothesis draws the rest (at least one)."""
    plans = session.plans
    key = (test_id, backend)
    if key in plans:
        return plans[key]
    options = session.options
    device = backends.get(backend).device()
    seed = options.seed or 0
    profile = options.profile
    strategy = strategies.cases_in(space, device, seed, sizes=big.sizes if profile == "big" else None)
    if space.cases is not None:  # harvested: exactly these cases, each once
        tour = list(dict.fromkeys(dataclasses.replace(c, seed=seed) for c in space.cases))
        budget = options.max_examples or space.max_examples or len(tour)
        explicit, draws = tour, 0
    else:
        if profile == "big":  # every case gigabytes: the profile's few examples, unless the run names a number
            tour, budget = big.tour(space, device, seed), options.max_examples or big.EXAMPLES[device]
        else:
            tour = strategies.regime_tour(space, device, seed)
            budget = options.max_examples or space.max_examples or options.default_examples[device]
        everything = strategies.every_case(space, device, seed, at_most=budget)
        if options.replay is not None:  # the replayed example alone
            explicit, draws = [], 1
        elif everything is not None:  # the tour first, then the rest of a space the budget holds
            explicit, draws = list(dict.fromkeys([*tour, *everything])), 0
        elif space.shapes:
            explicit = tour[: max(_covering(tour, space.shapes), budget - 1)]
            draws = max(budget - len(explicit), 0)
        else:
            explicit = tour[: max(budget - 1, 1)]
            draws = max(budget - len(explicit), 1)
    if (wanted := replay.replayed_case(options.replay)) is not None:  # an explicit example's replay: that case alone
        explicit, draws = [wanted], 0
    # With compile-ahead the cases are drawn beforehand with the run's seed (Hypothesis then draws the same
    # ones again): an unseeded run gets a fresh seed, kept here so that both draws share it.
    run_seed = options.seed
    if run_seed is None and session.pool_for(backend) is not None:
        run_seed = random.SystemRandom().getrandbits(64)
    plans[key] = Plan(strategy, tour, budget, explicit, run_seed, space.cases is not None, draws)
    return plans[key]


def _covering(tour: list[GemmCase], shapes: tuple[tuple[int, ...], ...]) -> int:
    """How many of the tour's cases, from its first, visit every listed shape."""
    missing = {tuple(s) for s in shapes}
    for i, case in enumerate(tour):
        missing.discard((case.batch, case.m, case.n, case.k) if case.batch else (case.m, case.n, case.k))
        if not missing:
            return i + 1
    return len(tour)


def queue_ahead(session: GemmSession, p: Plan, backend: str, test_id: str) -> None:
    """Hand the plan's cases, in the order the test will run them, to the compile-ahead pool (if any)."""
    pool = session.pool_for(backend)
    if pool is None:
        return
    if p.drawn is None:
        p.drawn = _drawn(p.strategy, p.explore_n, p.run_seed, SHARED, p.explicit) if p.explore_n else []
    from ..ahead.pool import job_args

    job = job_args(backends.get(backend), session.compiler, session.options.all_choices)
    pool.submit(backend, p.drawn + [c for c in p.explicit if c not in p.drawn], test_id, **job)


def _drawn(strategy, n: int, seed: int, shared: dict, tour: list | tuple = ()) -> list[GemmCase]:
    """The cases the explore run will draw, drawn beforehand with the same seed and settings (no database:
    this draw must leave nothing behind), in the order the run meets them: a case of `tour` (the explicit
    cases) is met there and rejected, and a case met before is rejected, as in `explore`. For a test whose
    examples all pass (Hypothesis only shrinks after a failure) the real run draws exactly these; where it
    draws others, those compile in the test process as before."""
    import hypothesis
    from hypothesis import given, settings

    out: list[GemmCase] = []
    listed, met = set(tour), set()

    def record(case: GemmCase) -> None:
        if case in met:
            hypothesis.reject()
        met.add(case)
        out.append(case)
        if case in listed:
            hypothesis.reject()

    draw = settings(max_examples=n, report_multiple_bugs=False, database=None, **shared)(given(case=strategy)(record))
    with hypothesis_compat.fixed_constants():
        hypothesis.seed(seed)(draw)()
    return out
