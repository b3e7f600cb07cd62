"""`python -m pytest_gemmguard harvest | verdicts | propose`: gemmguard's commands.

    python -m pytest_gemmguard verdicts BASE.json HEAD.json     # new / pre-existing / fixed / coverage lost
    python -m pytest_gemmguard propose RUN.json [RUN.json ...]   # [[known]] entries for a run's new failures

`verdicts` compares two verdict records (`--gemm-verdicts`, known/verdicts.py) and exits 1 when the head has a new
failure or lost coverage; `propose` prints proposed known-failures entries (known/proposals.py) for a person to
review. `harvest` writes the GEMMs a model runs to a harvest file:

    python -m pytest_gemmguard harvest mypkg.models:build --inputs 2,8,64 --out gemms.json
    python -m pytest_gemmguard harvest --config llama.json --batch 1 --batch 8 --seq 512 --out gemms.json

The factory is called with no arguments under `torch.device("meta")`, each `--inputs` becomes one float
tensor of that shape on the meta device (in the model's parameter dtype): nothing is allocated and no
weights are loaded. `--config` builds a transformers model from a local config.json (or a directory that
holds one) and feeds it `--batch` × `--seq` token ids; nothing is downloaded. Several `--batch` values
are harvested one by one and merged (counts add up).

Usage errors print one line, `gemmguard: ...`, on stderr and exit 2. A GEMM gemmguard cannot express is
not an error: it is listed in the file's "skipped" and named on stderr in one line. Torch is imported
only when the command runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from .errors import GemmUsageError


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one `gemmguard:` line and exit 2, like every usage error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise GemmUsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m pytest_gemmguard")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    h = commands.add_parser("harvest", help="trace a model and write the GEMMs it runs to a harvest file")
    h.add_argument("model", nargs="?", help="MODULE:FACTORY, a callable that returns the nn.Module")
    h.add_argument("--inputs", action="append", default=[], metavar="SHAPE",
                   help="one float input of this shape, e.g. 2,8,64 (repeat for more inputs)")  # fmt: skip
    h.add_argument("--config", help="a transformers config.json (or a directory with one) instead of MODEL")
    h.add_argument("--batch", action="append", type=int, metavar="N", help="with --config: batch size (repeatable)")
    h.add_argument("--seq", type=int, default=128, metavar="T", help="with --config: sequence length (default 128)")
    h.add_argument("--dtype", help="record GEMMs of the model's parameter dtype in this dtype (e.g. bfloat16)")
    h.add_argument("--out", help="the harvest JSON file to write (default: print it)")
    h.add_argument("--markdown", action="store_true", help="print the GEMMs as a Markdown table")
    v = commands.add_parser("verdicts", help="compare a head run's verdict record with its base's")
    v.add_argument("base", help="the base's record (--gemm-verdicts)")
    v.add_argument("head", help="the head's record")
    p = commands.add_parser("propose", help="propose known-failures entries for the failures in verdict records")
    p.add_argument("records", nargs="+", help="verdict records (--gemm-verdicts)")
    return parser


def verdicts_command(args: argparse.Namespace) -> int:
    from .known import verdicts

    base, head = verdicts.load(args.base), verdicts.load(args.head)
    result, lines = verdicts.report(base, head)
    print("\n".join(lines))
    return 1 if result.blocking else 0


def propose_command(args: argparse.Namespace) -> int:
    from .known import proposals, verdicts

    entries = proposals.propose(verdicts.load(path) for path in args.records)
    if not entries:
        print("gemmguard: no failure in these records needs an entry (known ones have theirs)", file=sys.stderr)
        return 0
    print("# Proposed by `python -m pytest_gemmguard propose`: review each entry, name the mechanism, set the link.")
    print("\n".join(entries), end="")
    return 0


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.split(","))
    except ValueError:
        dims = ()
    if not dims or any(d < 1 for d in dims):
        raise GemmUsageError(f"--inputs {text!r}: expected sizes >= 1 separated by commas, e.g. 2,8,64")
    return dims


def _split(spec: str) -> tuple[str, str]:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise GemmUsageError(f"model {spec!r}: expected MODULE:FACTORY, e.g. mypkg.models:build")
    return module_name, attr


def load_factory(spec: str) -> Any:
    """MODULE:FACTORY -> the callable (FACTORY may be dotted: pkg.mod:Class.build)."""
    module_name, attr = _split(spec)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise GemmUsageError(f"model {spec!r}: cannot import {module_name!r} ({exc})") from None
    except Exception as exc:
        raise GemmUsageError(f"model {spec!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}") from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise GemmUsageError(f"model {spec!r}: {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise GemmUsageError(f"model {spec!r}: {attr!r} is not callable")
    return target


def _build(spec: str) -> Any:
    import torch

    factory = load_factory(spec)
    try:
        with torch.device("meta"):
            model = factory()
    except Exception as exc:
        raise GemmUsageError(f"model {spec!r}: the factory raised {type(exc).__name__}: {exc}") from None
    if not isinstance(model, torch.nn.Module):
        raise GemmUsageError(f"model {spec!r}: the factory returned {type(model).__name__}, not an nn.Module")
    return model


def _param_dtype(model: Any) -> Any:
    import torch

    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32


def harvest_command(args: argparse.Namespace) -> int:
    from . import harvest

    if bool(args.model) == bool(args.config):
        raise GemmUsageError("harvest: give a model (MODULE:FACTORY) or --config, not both or neither")
    if args.config:
        if args.inputs:
            raise GemmUsageError("harvest: --inputs goes with a model; --config takes --batch and --seq")
        batches = args.batch or [1]
        if any(b < 1 for b in batches) or args.seq < 1:
            raise GemmUsageError("harvest: --batch and --seq must be >= 1")
        runs = [harvest.harvest_config(args.config, batch=b, seq=args.seq, dtype=args.dtype) for b in batches]
        source = {"config": args.config, "batch": batches, "seq": args.seq}
    else:
        _split(args.model)
        if args.batch:
            raise GemmUsageError("harvest: --batch and --seq go with --config; a model takes --inputs")
        if not args.inputs:
            raise GemmUsageError("harvest: give the model's inputs, e.g. --inputs 2,8,64 (one per input)")
        import torch

        shapes = [_shape(s) for s in args.inputs]
        model = _build(args.model)
        dtype = _param_dtype(model)
        inputs = [torch.empty(s, dtype=dtype, device="meta") for s in shapes]
        runs = [harvest.harvest_gemms(model, *inputs, dtype=args.dtype)]
        source = {"model": args.model, "inputs": [list(s) for s in shapes]}
    if args.dtype:
        source["dtype"] = args.dtype
    result = harvest.merge(runs, source)
    if args.out:
        harvest.save_harvest(args.out, result)
    elif not args.markdown:
        sys.stdout.write(harvest.to_json_text(result))
    if args.markdown:
        sys.stdout.write(harvest.markdown_table(result))
    elif args.out:
        calls = sum(g.count for g in result)
        print(f"gemmguard: {len(result)} distinct GEMMs ({calls} calls) written to {args.out}")
    line = result.skipped_line()
    if line:
        print(f"gemmguard: {line}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        with warnings.catch_warnings():
            # The command names the skipped GEMMs itself, in one line on stderr.
            warnings.filterwarnings("ignore", message="gemmguard: harvest skipped")
            commands = {"harvest": harvest_command, "verdicts": verdicts_command, "propose": propose_command}
            return commands[args.command](args)
    except GemmUsageError as exc:
        print(f"gemmguard: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
