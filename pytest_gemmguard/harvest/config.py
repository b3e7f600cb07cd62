"""`harvest_config`: the GEMMs of a transformers model built from its config on the meta device (no
weights, nothing downloaded)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from ..errors import GemmUsageError
from .items import Harvest
from .nodes import first_line
from .trace import harvest


def harvest_config(config: Any, *, batch: int = 1, seq: int = 128, dtype: Any = None) -> Harvest:
    """The GEMMs of a transformers model built from `config` (a dict as in a config.json, a path to one,
    or a PretrainedConfig) on the meta device, run on `batch` sequences of `seq` tokens. Nothing is
    downloaded; transformers must be installed. The KV cache is off: one full forward (prefill)."""
    if isinstance(config, (str, os.PathLike)):
        config = _read_config(Path(config))
    try:
        import transformers
    except ImportError:
        raise GemmUsageError("harvesting a config needs transformers (pip install transformers)") from None
    cfg = _load_config(config, transformers)
    cfg.use_cache = False
    model_dtype = _config_dtype(cfg)
    try:
        with torch.device("meta"):
            try:
                model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=model_dtype)
            except ValueError:  # not a causal LM (an encoder, say): the bare model
                model = transformers.AutoModel.from_config(cfg, dtype=model_dtype)
    except Exception as exc:
        raise GemmUsageError(f"could not build a model from the config: {first_line(exc)}") from None
    model.eval()
    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    return harvest(model, (ids,), {"use_cache": False}, dtype)


def _read_config(path: Path) -> Any:
    if path.is_dir():
        path = path / "config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GemmUsageError(f"cannot read config {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GemmUsageError(f"config {path} is not JSON: {exc}") from None


def _load_config(config: Any, transformers: Any) -> Any:
    if isinstance(config, transformers.PretrainedConfig):
        return config
    if not isinstance(config, dict) or "model_type" not in config:
        raise GemmUsageError("a transformers config must be a dict (as in config.json) with a 'model_type'")
    fields = dict(config)
    try:
        return transformers.AutoConfig.for_model(fields.pop("model_type"), **fields)
    except (ValueError, KeyError) as exc:
        raise GemmUsageError(f"not a transformers config: {first_line(exc)}") from None


def _config_dtype(cfg: Any) -> Any:
    raw = getattr(cfg, "dtype", None) or getattr(cfg, "torch_dtype", None)
    if isinstance(raw, str):
        raw = getattr(torch, raw, None)
    return raw if isinstance(raw, torch.dtype) else torch.float32
