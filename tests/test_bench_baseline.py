"""Baseline files: JSON, atomic, fingerprinted; corrupt ones are errors and never overwritten."""

import json
import os

import pytest

from pytest_gemmguard.bench import baseline
from pytest_gemmguard.bench.baseline import BaselineError

HERE = {"cpu": "Test CPU", "torch": "2.13.0", "device": "cpu"}
ENTRY = {"median_s": 1e-3, "samples": [1e-3, 1.1e-3], "ref_median_s": 2e-3}


def test_round_trip_is_plain_json_and_leaves_no_temporary_files(tmp_path):
    path = str(tmp_path / "sub" / "base.json")
    assert baseline.save(path, HERE, {"t | case": ENTRY}) == 1
    doc = json.loads(open(path).read())
    assert doc["format"] == "gemmguard-baseline" and doc["fingerprint"] == HERE
    assert os.listdir(tmp_path / "sub") == ["base.json"]
    loaded = baseline.load(path, HERE)
    assert loaded.entries == {"t | case": ENTRY} and not loaded.forced
    # Saving again merges by key.
    assert baseline.save(path, HERE, {"other": ENTRY}) == 2


def test_missing_baseline_is_none(tmp_path):
    assert baseline.load(str(tmp_path / "nope.json"), HERE) is None


@pytest.mark.parametrize("content", ["{not json", '{"format": "something-else"}', "[]"])
def test_corrupt_baseline_is_one_line_error_and_never_overwritten(tmp_path, content):
    path = tmp_path / "base.json"
    path.write_text(content)
    with pytest.raises(BaselineError) as info:
        baseline.load(str(path), HERE)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    with pytest.raises(BaselineError):
        baseline.save(str(path), HERE, {"k": ENTRY}, force=True)
    assert path.read_text() == content


def test_foreign_baseline_is_refused_unless_forced(tmp_path):
    path = str(tmp_path / "base.json")
    baseline.save(path, {**HERE, "torch": "2.11.0"}, {"k": ENTRY})
    with pytest.raises(BaselineError) as info:
        baseline.load(path, HERE)
    message = str(info.value)
    assert "\n" not in message and "torch: '2.13.0' here vs '2.11.0' in baseline" in message
    assert "--gemm-baseline-force" in message
    assert baseline.load(path, HERE, force=True).forced
    with pytest.raises(BaselineError, match="not saving"):
        baseline.save(path, HERE, {"new": ENTRY})
    assert baseline.save(path, HERE, {"new": ENTRY}, force=True) == 1  # forced: replaced, not mixed


def test_fingerprint_names_the_machine_and_versions():
    fp = baseline.fingerprint("cpu")
    assert {"cpu", "torch", "triton", "cutlass_dsl", "python", "machine"} <= set(fp)
    json.dumps(fp)


def test_older_baselines_are_read_and_merged_other_versions_refused_in_one_line(tmp_path):
    path = tmp_path / "base.json"
    old = {"format": "gemmguard-baseline", "version": 1, "fingerprint": HERE, "entries": {"old": ENTRY}}
    path.write_text(json.dumps(old))
    assert baseline.load(str(path), HERE).entries == {"old": ENTRY}  # one cold compile each: untested
    assert baseline.save(str(path), HERE, {"new": {**ENTRY, "cold_compile_samples": [1.0] * 5}}) == 2
    doc = json.loads(path.read_text())
    assert doc["version"] == baseline.VERSION == 3 and set(doc["entries"]) == {"old", "new"}
    # Version 2 (before paired ratios, issue 13): read, and judged through its reference median.
    two = tmp_path / "two.json"
    two.write_text(json.dumps({**old, "version": 2}))
    assert baseline.load(str(two), HERE).entries == {"old": ENTRY}
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**old, "version": 4}))
    with pytest.raises(BaselineError) as info:
        baseline.load(str(future), HERE)
    assert "\n" not in str(info.value) and "has version 4; this gemmguard reads versions 1, 2, 3" in str(info.value)
