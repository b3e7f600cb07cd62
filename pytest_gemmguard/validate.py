"""One validation path for everything the user hands gemmguard, each error one line naming where the value
came from (a flag, an ini key, an environment variable, a `[tool.gemmguard]` key, a decorator or fixture
argument) and how to fix it.

- Settings (`CORE`, `BENCH`): each one declared once, with its flag, ini key, environment variable and
  pyproject key; the plugins add their options from these tables and read them through `resolve`, in the
  order flag > environment > ini > pyproject > default. The value parsers are in parsers.py, but for the two
  that check against gemmguard's own parts (backend names, the replay line), here. The backends' environment
  variables are declared with the backends (backends/settings.py).
- The case space (`case_space`, in cases/space.py next to what it builds): `@gemm_case`, `gemm_benchmark` and
  `strategies.gemm_cases` all narrow the case space through it, so each takes the same names and fails the
  same way.

Torch-free (the pytest plugins load it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .cases import memory
from .errors import GemmUsageError
from .parsers import (
    any_int,
    directory,
    fail_or_warn,
    fewer_threads_choice,
    flag,
    fraction,
    gpu_choice,
    on_off,
    positive_int,
    profile_choice,
    seconds,
    text,
    workers,
    writable_file,
)
from .run import replay as replays

# ---------------------------------------------------------------- parsers that know gemmguard's parts


def backend_list(value: Any) -> list[str]:
    """'Triton, aten' -> ['triton', 'aten'] (names checked against the registry; 'auto'/'all' kept)."""
    from . import backends

    known = backends.names()
    valid = ", ".join([*known, "auto", "all"])
    parts = [p.strip().lower() for p in str(value).split(",")]
    names = [p for p in parts if p]
    if not names:
        raise ValueError(f" is empty; valid: {valid}")
    if len(names) < len(parts):
        raise ValueError("a backend name is empty (two commas in a row, or one at an end)")
    for name in names:
        if name not in (*known, "auto", "all"):
            raise ValueError(f": unknown backend {name!r}; valid: {valid}")
    return names


def replay(value: Any) -> str:
    text = str(value)
    version, _, blob = text.partition(":")
    if not version or not blob:
        raise ValueError("expected VERSION:BLOB or case:... as printed in a failure report")
    replays.case_fields(text)  # a malformed case: ValueError
    return text


# ---------------------------------------------------------------- settings


@dataclass(frozen=True)
class Setting:
    """One user setting and every place it can come from."""

    name: str  # attribute name in the resolved settings
    parse: Callable[[Any], Any]
    default: Any
    help: str
    flag: str | None = None
    ini: str | None = None
    env: str | None = None
    table: str | None = None  # key of [tool.gemmguard]
    is_flag: bool = False  # a store_true option
    metavar: str | None = None
    number: bool = False  # errors show the value as a number (--gemm-max-examples=0), not as text ('0')
    once: bool = False  # the flag given twice is a usage error (argparse would keep the last one without a word)


ENV_BACKENDS = "GEMMGUARD_BACKENDS"
BACKEND_NAMES = "aten, triton, cutlass, cutedsl, cutedsl[quack], cpp, triton[kernels], cutedsl[kernels]"

CORE: tuple[Setting, ...] = (
    Setting("backends", backend_list, ["auto"], f"comma-separated backends: {BACKEND_NAMES}; 'auto' (default: all "
            "usable here) or 'all'. A backend named here that cannot run fails the run (see --gemm-allow-unavailable)",
            flag="--gemm-backends", ini="gemm_backends", env=ENV_BACKENDS, metavar="LIST", once=True),
    Setting("allow_unavailable", flag, False, "skip, instead of fail, the tests of a backend named in "
            "--gemm-backends that cannot run here", flag="--gemm-allow-unavailable", ini="gemm_allow_unavailable",
            env="GEMMGUARD_ALLOW_UNAVAILABLE", is_flag=True),
    Setting("max_examples", positive_int, None, "examples per gemm case (overrides every test)",
            flag="--gemm-max-examples", ini="gemm_max_examples", metavar="N", number=True),
    Setting("seed", any_int, None, "seed for case generation and input values", flag="--gemm-seed", metavar="S",
            number=True),
    Setting("replay", replay, None, "replay one failing example: VERSION:BLOB or case:... from a report",
            flag="--gemm-replay"),
    Setting("dynamic", flag, False, "compile with dynamic shapes (one compile serves many sizes) instead of one "
            "static compile per shape", flag="--gemm-dynamic", is_flag=True),
    Setting("profile", profile_choice, "default", "the sizes drawn: 'default', or 'big' (off by default): one "
            "tensor of every case past 2**31 elements, where 32-bit indexing wraps; a few examples a test, each "
            "gigabytes, the winner judged in row chunks", flag="--gemm-profile", ini="gemm_profile",
            env="GEMMGUARD_PROFILE", table="profile", metavar="default|big"),
    Setting("compile_timeout", lambda v: seconds(v, zero_means="no limit"), 600.0, "seconds per compile (0: none)",
            flag="--gemm-compile-timeout", metavar="S", number=True),
    Setting("memory_limit", memory.parse_limit, "auto", "memory a case may need (host; a GPU backend's device too), "
            "checked before its inputs are allocated: 'auto' (default: what is free now), BYTES (K/M/G/T suffixes: "
            "powers of 1024) to allow more or less on purpose, or 'off'", flag="--gemm-memory-limit",
            ini="gemm_memory_limit", env="GEMMGUARD_MEMORY_LIMIT", table="memory_limit", metavar="BYTES|auto|off"),
    Setting("shrink_s", lambda v: seconds(v, zero_means="Hypothesis's own limit"), 60.0, "seconds Hypothesis may "
            "spend shrinking one failing test (each step is a compile; 0: Hypothesis's own 300 s); the failure is "
            "reported either way, with the smallest case found by then", flag="--gemm-shrink-time",
            ini="gemm_shrink_time", table="shrink_time", metavar="S", number=True),
    Setting("compile_workers", workers, None, "processes that compile upcoming cases ahead while the test process "
            "checks ('auto': every core but two, within memory, none below 4 cores; for CPU backends half the cores "
            "less one, at most 8, none below 8; 0: off)",
            flag="--gemm-compile-workers", ini="gemm_compile_workers", env="GEMMGUARD_COMPILE_WORKERS",
            table="compile_workers", metavar="N"),
    Setting("gpus", gpu_choice, "all", "GPUs for pytest-xdist workers: each worker gets one (round robin; its "
            "CUDA_VISIBLE_DEVICES), and -n auto starts one worker per GPU ('all', default; 'none': every worker sees "
            "every GPU, as without gemmguard; '0,2': those)", flag="--gemm-gpus", ini="gemm_gpus",
            env="GEMMGUARD_GPUS", metavar="all|none|LIST"),
    Setting("cache_dir", directory, None, "Inductor/Triton cache dir (default: a fresh temp dir per run)",
            flag="--gemm-cache-dir", metavar="DIR"),
    Setting("kernel_cache", directory, None, "keep compiled kernels (C++/CUDA libraries, Triton binaries) in DIR "
            "across runs but lower and autotune every graph afresh (Inductor's FX-graph, AOTAutograd and "
            "autotune-result caches off): repeated measurement rounds skip the rebuilds, not the decisions",
            flag="--gemm-kernel-cache", env="GEMMGUARD_KERNEL_CACHE", metavar="DIR"),
    Setting("repro_dir", directory, "gemmguard-repro", "where standalone repro scripts go",
            flag="--gemm-repro-dir", metavar="DIR"),
    Setting("all_choices", on_off, True, "check every autotune candidate against the oracle, not only the "
            "winner (on/off; default on): a wrong candidate that lost fails the case, naming it",
            flag="--gemm-all-choices", ini="gemm_all_choices", env="GEMMGUARD_ALL_CHOICES", table="all_choices",
            metavar="on|off"),
    Setting("fewer_threads", fewer_threads_choice, "auto", "on the CPU, run each verified case's compiled code "
            "again with every OpenMP parallel region on one thread (a kernel that splits its work for the threads "
            "it was compiled for must not skip any when fewer come): 'auto' (default) for kernels Inductor writes "
            "(cpp), 'all' for ATen's library GEMM too, 'off'", flag="--gemm-fewer-threads", ini="gemm_fewer_threads",
            env="GEMMGUARD_FEWER_THREADS", table="fewer_threads", metavar="auto|all|off"),
    Setting("known", text, None, "known-failures TOML: a failure an entry describes is xfail with its link; "
            "an entry whose cases ran and passed is XPASS", flag="--gemm-known", env="GEMMGUARD_KNOWN",
            table="known_failures", metavar="FILE"),
    Setting("known_strict", flag, False, "an XPASS (a known failure that no longer shows) fails its test, so the "
            "known-failures file stays true", flag="--gemm-known-strict", is_flag=True),
    Setting("known_shipped", on_off, True, "apply the known upstream bugs gemmguard ships (on/off; default on); "
            "your own --gemm-known file adds entries and overrides a shipped one by its id",
            flag="--gemm-known-shipped", ini="gemm_known_shipped", env="GEMMGUARD_KNOWN_SHIPPED",
            table="known_shipped", metavar="on|off"),
    Setting("verdicts", writable_file, None, "write every example's case and verdict to this JSON record (the "
            "run keeps going past a failure so the record covers the whole draw; the test still fails)",
            flag="--gemm-verdicts", env="GEMMGUARD_VERDICTS", metavar="PATH"),
    Setting("base_verdicts", text, None, "a verdict record of the base (--gemm-verdicts): its seed is drawn "
            "again; a failure it has too is pre-existing (reported, not failed), one it lacks is new, a case it "
            "ran that this run's backend refuses is coverage lost (fails)", flag="--gemm-base-verdicts",
            env="GEMMGUARD_BASE_VERDICTS", metavar="PATH"),
)  # fmt: skip

BENCH: tuple[Setting, ...] = (
    Setting("baseline", text, None, "compare gemm_benchmark results with this baseline JSON; real regressions fail",
            flag="--gemm-baseline", metavar="PATH"),
    Setting("require_baseline", flag, False, "a --gemm-baseline that does not exist is an error, not a note (CI)",
            flag="--gemm-require-baseline", env="GEMMGUARD_REQUIRE_BASELINE", is_flag=True),
    Setting("save_baseline", writable_file, None, "write (or update) a baseline JSON with this run's results",
            flag="--gemm-save-baseline", metavar="PATH"),
    Setting("baseline_force", flag, False, "use a baseline recorded on other hardware/software anyway (and let "
            "saving replace one)", flag="--gemm-baseline-force", is_flag=True),
    Setting("bench_only", flag, False, "run only tests that use gemm_benchmark", flag="--gemm-bench-only",
            is_flag=True),
    Setting("no_bench", flag, False, "deselect tests that use gemm_benchmark", flag="--gemm-no-bench", is_flag=True),
    Setting("cold_compile", on_off, True, "measure cold/warm compile time in a fresh subprocess per case "
            "(on/off; default on)", flag="--gemm-cold-compile", table="cold_compile", metavar="on|off"),
    Setting("compile_samples", positive_int, 1, "cold compiles per case, each in a fresh process with empty caches. "
            "With >= 5 here and in the baseline a compile-time regression must also be significant (one-sided "
            "Mann-Whitney, alpha 0.01); with fewer a slowdown is reported, never failed",
            flag="--gemm-compile-samples", table="compile_samples", metavar="N"),
    Setting("max_time_s", seconds, 2.0, "time cap per measured case (seconds)", flag="--gemm-bench-time",
            table="max_time_s", metavar="SECONDS", number=True),
    Setting("cpu_threads", positive_int, None, "torch threads while timing on the CPU (1 makes timings repeatable "
            "on a shared machine)", flag="--gemm-cpu-threads", table="cpu_threads", metavar="N", number=True),
    Setting("rel_ci", lambda v: seconds(v), 0.01, "target half-width of the median's CI, relative", table="rel_ci"),
    Setting("min_samples", positive_int, 10, "runtime samples per measurement (>= 10)", table="min_samples"),
    Setting("verify", flag, True, "check each benchmarked case with the oracle first", table="verify"),
    Setting("reference", flag, True, "time eager ATen side by side as the in-run reference", table="reference"),
    # Default fail: a gate that cannot tell must not go green; the test fails as inconclusive (its own
    # column and error), never as a regression. warn: the test passes with a warning and the column.
    # No table key: runtime_regression in [tool.gemmguard] is a budget (bench/budget.py); this overrides it for a
    # run (the gate's action input), and a test's @pytest.mark.gemm_budget still overrides both.
    Setting("runtime_regression", fraction, None, "allowed runtime slowdown against the baseline for this run "
            "(default: [tool.gemmguard] runtime_regression, else 5%)", flag="--gemm-runtime-regression",
            env="GEMMGUARD_RUNTIME_REGRESSION", metavar="FRACTION"),
    Setting("inconclusive", fail_or_warn, "fail", "a runtime comparison whose noise hides the threshold "
            "(verdict inconclusive): fail the test, as inconclusive, not as a regression (default), or warn",
            flag="--gemm-inconclusive", ini="gemm_inconclusive", env="GEMMGUARD_INCONCLUSIVE", table="inconclusive",
            metavar="fail|warn"),
    Setting("report_json", writable_file, None, "write the benchmark JSON report here", flag="--gemm-report-json",
            metavar="PATH"),
    Setting("report_md", writable_file, None, "write the benchmark Markdown summary here ($GITHUB_STEP_SUMMARY is "
            "appended to)", flag="--gemm-report-md", metavar="PATH"),
    Setting("plots", directory, None, "draw runtime.png and compile.png in this directory (needs matplotlib)",
            flag="--gemm-plots", metavar="DIR"),
)  # fmt: skip


# Settings the backends read from the environment (docs/reference/environment.md, validated where they are read).
def add_options(parser: Any, group_name: str, description: str, settings: Sequence[Setting]) -> None:
    """Declare `settings` as pytest options and ini keys (values are read by `resolve`)."""
    group = parser.getgroup(group_name, description)
    for s in settings:
        if s.flag is None:
            continue
        shown = s.help.replace("%", "%%")  # argparse formats a help text with %: "5%" alone breaks --help
        if s.is_flag:
            group.addoption(s.flag, action="store_true", default=None, help=shown)
        elif s.once:  # every occurrence kept, so that `_sources` can refuse a second one
            group.addoption(s.flag, action="append", default=None, metavar=s.metavar, help=shown)
        else:
            group.addoption(s.flag, default=None, metavar=s.metavar, help=shown)
    for s in settings:
        if s.ini:
            parser.addini(s.ini, f"default for {s.flag}" if s.flag else s.help, default=None)


def _sources(config: Any, s: Setting, table: dict[str, Any]) -> list[tuple[str, Any]]:
    found = []
    if s.flag is not None:
        given = config.getoption(s.flag)
        if s.once and isinstance(given, list):
            if len(given) > 1:
                raise GemmUsageError(
                    f"{s.flag} was given {len(given)} times ({', '.join(map(repr, given))}); give it once, with "
                    f"one comma-separated list ({s.flag}={','.join(given)})"
                )
            given = given[0] if given else None
        found.append((s.flag, given))
    if s.env is not None:
        found.append((f"environment {s.env}", os.environ.get(s.env)))
    if s.ini is not None:
        found.append((f"ini {s.ini}", config.getini(s.ini)))
    if s.table is not None:
        found.append((f"[tool.gemmguard] {s.table}", table.get(s.table)))
    return found


def resolve(config: Any, settings: Sequence[Setting], table: dict[str, Any]) -> dict[str, Any]:
    """Each setting's value from the first source that gives one, parsed; GemmUsageError names the source.
    An empty string given on purpose (`--gemm-backends=`) is a value, and checked as one."""
    out: dict[str, Any] = {}
    for s in settings:
        value: Any = s.default
        for source, raw in _sources(config, s, table):
            if raw is None or (raw == "" and not source.startswith("--")) or (s.is_flag and raw is False):
                continue
            try:
                value = s.parse(raw)
            except ValueError as exc:
                raise GemmUsageError(_error_line(source, raw, str(exc), s.number)) from None
            break
        out[s.name] = value
    return out


def _error_line(source: str, raw: Any, problem: str, number: bool) -> str:
    if problem.startswith((": ", " ")):
        return f"{source}{problem}"
    shown = raw if isinstance(raw, (int, float)) or (number and _is_number(raw)) else repr(raw)
    return f"{source}={shown}: {problem}"


def _is_number(raw: Any) -> bool:
    try:
        float(str(raw))
    except ValueError:
        return False
    return True


def read_pyproject(rootdir: str) -> dict[str, Any]:
    """The `[tool.gemmguard]` table of rootdir/pyproject.toml ({} if absent)."""
    path = os.path.join(rootdir, "pyproject.toml")
    if not os.path.exists(path):
        return {}
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            return {}
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GemmUsageError(f"{path}: cannot read [tool.gemmguard]: {exc}") from None
    table = doc.get("tool", {}).get("gemmguard", {})
    if not isinstance(table, dict):
        raise GemmUsageError(f"{path}: [tool.gemmguard] must be a table")
    return table
