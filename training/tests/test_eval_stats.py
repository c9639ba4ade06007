"""Exact McNemar test, task-cluster bootstrap and pairing, against hand computations and scipy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binomtest

from captain_training.eval.errors import PairingError, ResultFileError
from captain_training.eval.results import EpisodeResult, read_results, write_results
from captain_training.eval.stats import (
    PairedOutcome,
    cluster_bootstrap_ci,
    compare_paired,
    mcnemar_exact,
    pair_results,
)


def _r(suite: str, task: str, state, host: bool, strict: bool | None = None) -> EpisodeResult:
    return EpisodeResult(suite, task, str(state), host, host if strict is None else strict)


def test_mcnemar_by_hand_and_against_scipy():
    # b=1, c=6: n=7, P[X<=1] = (1 + 7) / 128, two-sided p = 0.125
    assert mcnemar_exact(1, 6) == pytest.approx(0.125)
    assert mcnemar_exact(6, 1) == pytest.approx(0.125)
    # b=0, c=5: 2 / 32
    assert mcnemar_exact(0, 5) == pytest.approx(0.0625)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0
    for b, c in [(1, 6), (0, 10), (12, 3), (30, 45), (2, 2), (0, 1), (100, 130), (7, 20)]:
        expected = binomtest(min(b, c), b + c, 0.5, alternative="two-sided").pvalue
        assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9), (b, c)


def test_pairing_on_triples_and_clear_errors():
    a = [_r("libero_goal", "libero_goal/0", 11, True), _r("libero_goal", "libero_goal/0", 12, False)]
    b = [_r("libero_goal", "libero_goal/0", "12", True), _r("libero_goal", "libero_goal/0", 11, True)]
    pairs = pair_results(a, b, "host_success")
    assert [(p.init_state, p.a, p.b) for p in pairs] == [("11", True, True), ("12", False, True)]
    extra = [*b, _r("libero_goal", "libero_goal/1", 11, True)]
    with pytest.raises(PairingError, match="1 only in B"):
        pair_results(a, extra, "host_success")
    assert len(pair_results(a, extra, "host_success", allow_unpaired=True)) == 2
    with pytest.raises(PairingError, match="duplicate"):
        pair_results(a + a[:1], b, "host_success")
    with pytest.raises(PairingError, match="share no"):
        pair_results(a, [_r("x", "y", 0, True)], "host_success", allow_unpaired=True)


def test_cluster_bootstrap_by_hand():
    # task 1: both policies succeed twice; task 2: only B succeeds, twice. Overall B - A = 0.5.
    pairs = [PairedOutcome("s", "t1", "0", True, True), PairedOutcome("s", "t1", "1", True, True),
             PairedOutcome("s", "t2", "0", False, True), PairedOutcome("s", "t2", "1", False, True)]
    # resampling two clusters: {t1,t1} -> 0 (p 1/4), {t1,t2} -> 0.5 (p 1/2), {t2,t2} -> 1 (p 1/4)
    lo, hi = cluster_bootstrap_ci(pairs, n_boot=4000, seed=0)
    assert (lo, hi) == (0.0, 1.0)
    lo, hi = cluster_bootstrap_ci(pairs, n_boot=4000, seed=0, confidence=0.4)
    assert (lo, hi) == (0.5, 0.5)
    assert cluster_bootstrap_ci(pairs, n_boot=500, seed=3) == cluster_bootstrap_ci(pairs, n_boot=500, seed=3)
    same = [PairedOutcome("s", f"t{i}", "0", True, False) for i in range(5)]
    assert cluster_bootstrap_ci(same, n_boot=200) == (-1.0, -1.0)


def test_compare_paired_on_a_realistic_table(tmp_path):
    rng = np.random.default_rng(0)
    a, b = [], []
    for suite in ("libero_spatial", "libero_goal"):
        for task in range(10):
            for state in range(11, 17):
                sa = bool(rng.random() < 0.5)
                sb = bool(rng.random() < (0.85 if not sa else 0.95))
                a.append(_r(suite, f"{suite}/{task}", state, sa, sa and rng.random() < 0.8))
                b.append(_r(suite, f"{suite}/{task}", state, sb, sb and rng.random() < 0.9))
    write_results(a, tmp_path / "a.jsonl")
    write_results(b, tmp_path / "b.jsonl")
    ra, rb = read_results(tmp_path / "a.jsonl"), read_results(tmp_path / "b.jsonl")
    out = compare_paired(ra, rb, "host_success", n_boot=2000, seed=1)
    ha = np.array([r.host_success for r in a])
    hb = np.array([r.host_success for r in b])
    assert out.n_pairs == 120 and out.n_tasks == 20
    assert out.only_a == int(np.sum(ha & ~hb)) and out.only_b == int(np.sum(~ha & hb))
    assert out.difference == pytest.approx(hb.mean() - ha.mean())
    assert out.p_value == pytest.approx(binomtest(out.only_a, out.only_a + out.only_b, 0.5).pvalue)
    assert out.ci_low < out.difference < out.ci_high
    assert out.per_suite["libero_goal"]["n"] == 60
    json.dumps(out.to_dict())
    strict = compare_paired(ra, rb, "strict_success", n_boot=500)
    assert strict.rate_a <= out.rate_a


def test_result_file_validation(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"suite": "s", "task_id": "t", "init_state": 1, "host_success": true}\n')
    with pytest.raises(ResultFileError, match="strict_success"):
        read_results(path)
    path.write_text('{"suite": "s", "task_id": "t", "init_state": 1, "host_success": false, '
                    '"strict_success": true}\n')
    with pytest.raises(ResultFileError, match="impossible"):
        read_results(path)
    path.write_text('{"suite": "s", "task_id": "t", "init_state": 1, "host_success": "yes", '
                    '"strict_success": false}\n')
    with pytest.raises(ResultFileError, match="true/false"):
        read_results(path)
    path.write_text('{"suite": "s", "task_id": "t", "init_state": 1, "host_success": 1, '
                    '"strict_success": 0, "requests": 14}\n')
    (r,) = read_results(path)
    assert r.host_success and not r.strict_success and r.extra == {"requests": 14}
