"""Budgets: absolute limits (compile_s, runtime_ms) and limits relative to a baseline (runtime_regression,
compile_regression), from `[tool.gemmguard]` in pyproject.toml, overridden per test by
`@pytest.mark.gemm_budget(...)`. `check` turns a measurement and its baseline entry into the list of
broken budgets, each one line with the numbers, the baseline's and the threshold. The runtime verdict is
verdict.py's three-way rule; an inconclusive one breaks no budget (it is not a regression) and is returned
in the compared info for the fixture to fail or warn on (--gemm-inconclusive).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ..errors import GemmUsageError
from .stats import compare, parse_fraction


@dataclass(frozen=True)
class Budget:
    compile_s: float | None = None  # cold compile when measured, else this session's compile
    runtime_ms: float | None = None  # median runtime
    runtime_regression: float = 0.05  # allowed slowdown against the baseline (ratio of medians - 1)
    compile_regression: float = 0.20
    alpha: float = 0.01  # significance level of the regression tests, runtime and compile (false-alarm rate)

    def merged(self, overrides: dict[str, Any], where: str) -> Budget:
        return replace(self, **parse(overrides, where))


_FRACTIONS = ("runtime_regression", "compile_regression", "alpha")
# Keys of [tool.gemmguard] that are not budgets (read by the bench plugin itself).
SETTINGS = (
    "cold_compile",
    "compile_samples",
    "max_time_s",
    "rel_ci",
    "min_samples",
    "verify",
    "reference",
    "cpu_threads",
    "known_failures",  # read by the checking half
    "inconclusive",
)


def parse(values: dict[str, Any], where: str) -> dict[str, Any]:
    """Validate budget keys; a bad one raises GemmUsageError naming `where` (a marker or a file)."""
    known = {f.name for f in fields(Budget)}
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in SETTINGS:
            continue
        if key not in known:
            raise GemmUsageError(f"{where}: unknown budget {key!r}; valid: {', '.join(sorted(known))}")
        if value is None:
            out[key] = None if key in ("compile_s", "runtime_ms") else getattr(Budget, key)
            continue
        try:
            out[key] = parse_fraction(value, key) if key in _FRACTIONS else float(value)
        except ValueError as exc:
            raise GemmUsageError(f"{where}: {exc}") from None
        if key not in _FRACTIONS and out[key] <= 0:
            raise GemmUsageError(f"{where}: {key}={value!r} must be > 0")
    return out


def _ms(s: float) -> str:
    return f"{s * 1e3:.4g} ms"


def check(m, base: dict | None, budget: Budget) -> tuple[list[str], dict[str, Any]]:
    """Broken budgets of measurement `m` (one line each) and what was compared (for reports)."""
    broken: list[str] = []
    info: dict[str, Any] = {}
    compile_now, compile_kind = m.compile_for_budget()
    if budget.compile_s is not None and compile_now is not None and compile_now > budget.compile_s:
        broken.append(f"compile time {compile_now:.2f} s ({compile_kind}) > budget compile_s={budget.compile_s:g} s")
    if budget.runtime_ms is not None and m.median_s * 1e3 > budget.runtime_ms:
        ci = f"95% CI {_ms(m.ci_low_s)}..{_ms(m.ci_high_s)}"
        broken.append(f"runtime {_ms(m.median_s)} ({ci}) > budget runtime_ms={budget.runtime_ms:g} ms")
    if base is None:
        return broken, info
    from .verdict import judge_entries

    v = judge_entries(m.as_dict(), base, budget.runtime_regression, budget.alpha)
    if v is not None:
        info["runtime"] = {
            "ratio": v.ratio,
            "p_value": v.p_value,
            "regression": v.regression,
            "normalised": v.normalised,
            "verdict": v.verdict,
            "detect": v.detect if v.detect != float("inf") else None,
            "noise": [v.noise_now, v.noise_base],
            "threshold": v.threshold,
            "alpha": v.alpha,  # the CI gate judges the absolute times over its rounds at the same level
            "describe": v.describe(),
        }
        if v.regression:
            broken.append(
                f"runtime regression {v.describe()}: now {_ms(m.median_s)}, baseline {_ms(base['median_s'])}"
                + (
                    f" (reference now {_ms(m.ref_median_s)}, baseline {_ms(base['ref_median_s'])})"
                    if v.normalised and m.ref_median_s and base.get("ref_median_s")
                    else ""
                )
            )
    now_samples, base_samples = _compile_samples(m, base, compile_kind)
    if now_samples and base_samples:
        # The same rule as runtime: beyond the threshold AND a significant U test, which needs >= 5 cold
        # compiles on each side; with fewer, a slowdown is only reported as possible. Compile times have no
        # in-run reference, so the ratio is absolute.
        cmp = compare(now_samples, base_samples, budget.compile_regression, budget.alpha)
        info["compile"] = {
            "ratio": cmp.ratio,
            "kind": compile_kind,
            "p_value": cmp.p_value if cmp.tested else None,
            "tested": cmp.tested,
            "n": [cmp.n_current, cmp.n_baseline],
            "regression": cmp.regression,
            "possible": cmp.possible_regression,
            "threshold": budget.compile_regression,  # the compile plot draws it
        }
        if cmp.regression:
            broken.append(
                f"compile time regression {(cmp.ratio - 1) * 100:+.0f}% ({compile_kind}; threshold "
                f"+{budget.compile_regression * 100:g}%, {cmp.significance()}): now {_secs(now_samples)}, "
                f"baseline {_secs(base_samples)}"
            )
    return broken, info


def _compile_samples(m, base: dict, kind: str) -> tuple[list[float], list[float]]:
    """Compile-time samples of this run and of the baseline entry, of the same kind (cold or session).
    A baseline from before repeated cold compiles has only its one `cold_compile_s`: one sample."""
    if kind == "cold":
        now = list(m.cold_compile_samples) or [m.cold_compile_s]
        then = base.get("cold_compile_samples") or ([base["cold_compile_s"]] if base.get("cold_compile_s") else [])
    elif kind == "session":
        now = [m.compile_s]
        then = [base["compile_s"]] if base.get("compile_s") else []
    else:
        return [], []
    return [float(v) for v in now], [float(v) for v in then if v]


def _secs(samples: list[float]) -> str:
    from .stats import median

    if len(samples) == 1:
        return f"{samples[0]:.2f} s"
    return f"median {median(samples):.2f} s of {len(samples)} ({', '.join(f'{v:.2f}' for v in samples)} s)"
