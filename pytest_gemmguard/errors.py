"""Exceptions that carry a one-line message for the user."""


class GemmUsageError(ValueError):
    """Bad input from the user (an option, a decorator argument, a file): one line saying the fix."""


class Unsupported(Exception):
    """The backend did not run its own kernel for this case (fallback, no valid choice, no GEMM)."""

    def __init__(self, backend: str, reason: str) -> None:
        super().__init__(f"unsupported by {backend} for this case: {reason}")
        self.backend = backend
        self.reason = reason


class CompileTimeout(Exception):
    """A compile ran past the per-compile time limit."""
