"""GitHub's workflow commands (`::error file=,line=,title=::message`) with their escaping, and the files a
runner hands a step: $GITHUB_STEP_SUMMARY (appended to) and $GITHUB_OUTPUT (the step's outputs)."""

from __future__ import annotations

import os
from typing import Any


def escape_data(text: str) -> str:
    """A workflow command's message: GitHub decodes %25, %0D and %0A, so these three must be encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value (file=, title=): also ':' and ',', which would end the value."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(name: str, message: str, **properties: Any) -> str:
    """`::name key=value,...::message`, escaped; properties that are None are left out."""
    props = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties.items() if v is not None)
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def append_summary(path: str | None, text: str) -> None:
    """$GITHUB_STEP_SUMMARY is shared by every step of the job: append, never replace."""
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")


def set_outputs(values: dict[str, str]) -> None:
    """The step's outputs, appended to $GITHUB_OUTPUT (nothing when it is not set)."""
    path = os.environ.get("GITHUB_OUTPUT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for key, value in values.items():
            if "\n" in value:
                fh.write(f"{key}<<GEMMGUARD_EOF\n{value}\nGEMMGUARD_EOF\n")
            else:
                fh.write(f"{key}={value}\n")
