"""Every exception gemmguard raises, under one root, so callers (and the plugin's report hook) classify an
outcome by its type, never by searching a message.

    GemmguardError
    ├── GemmUsageError        bad input from the user: an option, a decorator or fixture argument, a file
    ├── BaselineError         a baseline that cannot be used (corrupt, foreign, unreadable)
    ├── Unsupported           the backend ran no kernel of its own for a case: never a pass, never a failure
    ├── BackendUnavailable    the backend cannot run on this machine at all (the probe's reason and fix)
    ├── CompileTimeout        a compile or run went past --gemm-compile-timeout
    ├── BackendCrashed        the backend raised while compiling or running a case (not a size problem)
    │   ├── CaseKilledProcess the case killed the compile-ahead worker that ran it first (segfault, bad CUDA context)
    │   └── BackendRefused    Inductor found no valid choice for a case the backend takes (Backend.takes): a bug
    ├── UserCodeError         the test's own function raised, returned no tensor, or a result NaN/inf everywhere
    │   ├── NothingVerified   a `@gemm_case` test returned without calling gemm.check()
    │   └── CaseTooLarge      the test asked for a case that needs more memory than is free (--gemm-memory-limit)
    ├── ReplayNotReproduced   --gemm-replay ran its example and nothing failed (or it is no example of the test)
    ├── KnownFailureFixed     a known failure no longer shows, under --gemm-known-strict
    ├── GemmMismatch          the backend's kernel ran and its result was wrong   (also an AssertionError)
    │   └── CandidateMismatch an autotune candidate that lost was wrong (--gemm-all-choices)
    ├── MeasurementError      a timing no kernel could produce (the timer missed the work): refused
    ├── GemmBudgetError       a performance budget broke, or a regression is real (also an AssertionError)
    └── GemmInconclusive      the benchmark's noise hid its threshold, under --gemm-inconclusive=fail: not a
                              regression, but no pass either (also an AssertionError)

Torch-free: the pytest plugins import this at load.
"""

from __future__ import annotations


class GemmguardError(Exception):
    """Root of gemmguard's exceptions. The message is meant for the user as it stands."""


class GemmUsageError(GemmguardError, ValueError):
    """Bad input from the user (an option, a decorator argument, a file): one line saying the fix."""


class BaselineError(GemmguardError):
    """A baseline cannot be used: corrupt, or from other hardware/software. The message is one line."""


class Unsupported(GemmguardError):
    """The backend did not run its own kernel for this case (fallback, no valid choice, no GEMM)."""

    def __init__(
        self, backend: str, reason: str, every_of: int | None = None, settled: bool = True, no_choice: bool = False
    ) -> None:
        # every_of: the whole test was unsupported, for all this many examples (reason: the commonest one).
        # settled: another compile of the case would find the same (False: its choices all failed to build or
        # run, which a busy machine can cause): only a settled verdict of a compile-ahead worker is taken as is.
        # no_choice: Inductor raised NoValidChoicesError (a refusal, not a fallback): for a case the backend
        # takes, a bug (run/check.py makes it BackendRefused).
        if every_of is None:
            text = f"unsupported by {backend} for this case: {reason}"
        else:
            text = f"unsupported by {backend} for every case drawn ({every_of} examples; e.g. {reason})"
        super().__init__(text)
        self.backend = backend
        self.reason = reason
        self.settled = settled
        self.no_choice = no_choice


class BackendUnavailable(GemmguardError):
    """The backend cannot run on this machine (its probe's reason and fix are the message)."""

    def __init__(self, backend: str, line: str) -> None:
        super().__init__(f"backend {backend} {line}")
        self.backend = backend


class CompileTimeout(GemmguardError):
    """A compile ran past the per-compile time limit."""


class BackendCrashed(GemmguardError):
    """The backend raised while compiling or running a case. The size of the case has nothing to do with
    it as far as anyone knows, so it is reported at once with the exception, not shrunk for minutes."""

    kind = "raises"  # the known-failures kind that describes it

    def __init__(self, backend: str, exc: BaseException) -> None:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        super().__init__(f"{backend} raised {type(exc).__name__} while compiling or running the case: {first}")
        self.backend = backend
        self.exc_type = type(exc).__name__
        where = raised_at(exc)
        if where:  # the report's second line: whose code raised (a backend's, torch's, an import's, ours)
            self.add_note(f"gemmguard: raised at {where}")


def raised_at(exc: BaseException) -> str:
    """'file:line in function' of the innermost frame that raised `exc` (import machinery's frozen frames
    left out), the file shortened to its path inside site-packages; '' without a traceback."""
    tb, last = exc.__traceback__, None
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith("<frozen"):
            last = tb
        tb = tb.tb_next
    if last is None:
        return ""
    path = last.tb_frame.f_code.co_filename
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            path = path.rsplit(marker, 1)[1]
            break
    return f"{path}:{last.tb_lineno} in {last.tb_frame.f_code.co_name}"


class CaseKilledProcess(BackendCrashed):
    """Compiling and running the case killed the compile-ahead worker that tried it first (a segfault, an
    abort) or poisoned its CUDA context (an illegal memory access): the test process never ran it, so the
    rest of the suite goes on."""

    def __init__(self, backend: str, detail: str) -> None:
        GemmguardError.__init__(self, f"{backend} broke the process that compiled and ran the case ahead: {detail}; "
                                "the test process did not run it")  # fmt: skip
        self.backend = backend
        self.exc_type = "CaseKilledProcess"


class BackendRefused(BackendCrashed):
    """Inductor found no valid choice for a case the backend takes (its templates take every such GEMM:
    `Backend.takes`). Not "unsupported": the backend was asked for a GEMM it has kernels for and offered none,
    which is how a filter that is wrong for some sizes, or templates that all fail to build, show. Reported at
    once like a crash (the known-failures kind `refuses`), with what the backend took in this run beside it."""

    kind = "refuses"

    def __init__(self, backend: str, case: str, op: str, reason: str, takes: str, took: list[str]) -> None:
        GemmguardError.__init__(self, f"{backend} refused {case}: {reason}; a refusal of a case it takes ({takes})")
        self.backend = backend
        self.exc_type = "BackendRefused"
        if took:
            self.add_note(f"gemmguard: {backend} ran its own kernel on other {op} cases in this run: {'; '.join(took)}")
        else:
            self.add_note(f"gemmguard: {backend} had run no other {op} case in this run")


class UserCodeError(GemmguardError):
    """The test's own code is at fault (its function raised, returned no tensor, or a result with no finite
    element to compare): the test's error, not the backend's failure."""


class NothingVerified(UserCodeError):
    """A `@gemm_case` test returned from an example without calling gemm.check(): nothing was compared, so the
    example is the test's error, never a pass."""


class CaseTooLarge(UserCodeError):
    """The test asked for a case whose check needs more memory than this machine has free (or than
    --gemm-memory-limit allows), refused before its inputs are allocated (cases/memory.py): the test's error, since
    no backend ran, and a stop, never shrunk. The message is one line with both sizes and the way to allow it."""


class ReplayNotReproduced(GemmguardError):
    """--gemm-replay's example did not fail again: it passed (the failure may be fixed), or the blob is not an
    example of this test. The message is one line."""


class KnownFailureFixed(GemmguardError):
    """An entry of the known-failures file whose cases ran and all passed, under --gemm-known-strict: the
    file no longer tells the truth, so the test fails until the entry is removed or narrowed."""


class CoverageLost(GemmguardError):
    """Cases the base's backend ran (its verdict record) that this run's backend refuses: a regression of what
    is tested, even where nothing is wrong (known/verdicts.py)."""


class GemmMismatch(GemmguardError, AssertionError):
    """A backend's kernel ran and produced a wrong result. `candidates` names the autotune candidates the
    failure is confirmed to come from, where it is (a known entry may name them): for a wrong winner, the
    ones blamed by confirm.blame; empty when nothing is blamed. `kind`: what a known-failures entry must name to
    explain it ("wrong-result"; "wrong-with-fewer-threads" where the result was right until OpenMP gave the kernel
    fewer threads, crosscheck/threads.py)."""

    def __init__(self, message: str, candidates: tuple[str, ...] = (), kind: str = "wrong-result") -> None:
        super().__init__(message)
        self.candidates = tuple(candidates)
        self.kind = kind

    def __reduce__(self):  # pytest-xdist and compile-ahead workers pickle exceptions: keep the names (and notes)
        return (type(self), (str(self), self.candidates, self.kind), self.__dict__)


class CandidateMismatch(GemmMismatch):
    """The winner was right, but another autotune candidate of the case was wrong: it is a wrong result the
    next GPU or shape may pick, so it is handled as one (known failures, shrinking). `candidates` names the
    candidates that fail the case: each confirmed wrong by a compile that picks it (a known entry may name them)."""


class MeasurementError(GemmguardError):
    """A benchmark measurement that cannot be true (faster than this machine's measured peak by far): the
    timer missed the kernel. Refused, so no impossible number reaches a report or a baseline."""


class KnownFailureXPass(UserWarning):
    """A known failure that no longer shows (its cases ran and all passed): the entry may be stale."""


class BaseFixed(UserWarning):
    """Cases the base's verdict record has failing that pass in this run: fixed by the change (known/verdicts.py)."""


class GemmBudgetError(GemmguardError, AssertionError):
    """A budget was broken or a regression is real; the message holds the numbers."""


class GemmInconclusive(GemmguardError, AssertionError):
    """A runtime comparison too noisy to tell a slowdown of its threshold from none (issue 13): reported as
    inconclusive with the noise and the smallest detectable change, never as a regression."""


def headline(exc: BaseException, width: int) -> str:
    """An error's first non-empty line without gemmguard's own prefix, at most `width` characters: what a
    progress line shows of a failure before pytest's report."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0].removeprefix("gemmguard: ")[:width] if lines else ""
