"""Harvest the GEMMs a model really runs, so gemmguard guards those instead of random sizes.

    gemms = harvest_gemms(model, torch.empty(2, 8, 64, device="meta"))
    @gemm_case(harvested=gemms)          # or a JSON file written by `python -m pytest_gemmguard harvest`
    def test_my_model(gemm): gemm.check()

One job per module:

- `trace`: `harvest_gemms`; traces the model with torch.export and walks the graph (its docstring says why
  this tracing and which ops are kept whole).
- `nodes`: reading one export-graph node (its ATen op, traced values, arguments, module path).
- `classify`: which ops are GEMMs, and one GEMM node -> a gemmguard case, or why not.
- `epilogue`: the epilogue steps read off a GEMM's consumers.
- `layouts`: operand strides -> gemmguard's storages and layouts (`storage_of`).
- `items`: the data (`HarvestedGemm`, `Skipped`, `Harvest`, `HarvestWarning`) and `merge`.
- `file`: the harvest JSON file (`save_harvest`, `load_harvest`, `to_json_text`) and `markdown_table`.
- `cases`: a harvest -> gemmguard cases (`cases_for`, `around=`, `harvested_cases` for `@gemm_case`).
- `config`: `harvest_config`, a transformers model built from its config on the meta device.
"""

from __future__ import annotations

from .cases import cases_for, harvested_cases
from .config import harvest_config
from .file import load_harvest, markdown_table, save_harvest, to_json_text
from .items import Harvest, HarvestedGemm, HarvestWarning, Skipped, merge
from .layouts import storage_of
from .trace import harvest_gemms

__all__ = [
    "Harvest",
    "HarvestWarning",
    "HarvestedGemm",
    "Skipped",
    "cases_for",
    "harvest_config",
    "harvest_gemms",
    "harvested_cases",
    "load_harvest",
    "markdown_table",
    "merge",
    "save_harvest",
    "storage_of",
    "to_json_text",
]
