"""benchmarks/surface_compute.py and its harder surface (benchmarks/hard_surface/): the surface
is what its docstring says (an optimum better than the default, noise above the typical
single-constant effect, the configured noise sd), and a tiny night of the real loop on it
proposes only points its constraints allow and is read back to its compute budget."""
from __future__ import annotations

import contextlib
import io
import json
import math
import random
import statistics
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import surface_compute as sc  # noqa: E402
import surface_nights as sn  # noqa: E402
from loop.setup.search_space import constants, parse_space, valid  # noqa: E402

HARD = sc.SURFACES["hard"]


def space():
    return parse_space(yaml.safe_load((HARD.task / "task.yaml").read_text())["search_space"],
                       "task.yaml")


def default_point() -> dict:
    return constants({"train.py": (HARD.task / "train.py").read_text()})


def draw(dim, rng: random.Random) -> float:
    """A value from a dimension's whole space, as mutate draws it."""
    if dim.choices:
        return rng.choice(dim.choices)
    if dim.kind == "log_range":
        x = math.exp(rng.uniform(math.log(dim.low), math.log(dim.high)))
    else:
        x = rng.uniform(dim.low, dim.high)
    return round(x) if dim.integer else x


def test_the_optimum_is_a_valid_point_well_below_the_default():
    truth = HARD.module()
    best, default = truth.best_point(), default_point()
    assert valid(best, space()) is None
    assert truth.true_loss(best) == truth.FLOOR
    assert truth.true_loss(default) - truth.true_loss(best) > 0.3
    assert valid(default, space()) is None
    # not separable: the best LR moves with the batch and the width
    assert truth.lr_best({**best, "N_EMBD": 768}) < truth.lr_best(best) < \
        truth.lr_best({**best, "BATCH_SIZE": 1024})


def test_noise_is_above_the_median_single_constant_effect():
    truth, dims, rng = HARD.module(), space(), random.Random(0)
    for at in (default_point(), truth.best_point()):
        effects = []
        while len(effects) < 500:
            dim = rng.choice(list(dims.values()))
            point = {**at, dim.name: draw(dim, rng)}
            if valid(point, dims) is None:
                effects.append(abs(truth.true_loss(point) - truth.true_loss(at)))
        assert 0 < statistics.median(effects) <= HARD.noise


def test_the_final_metric_has_the_configured_noise_and_curves_cross(monkeypatch):
    truth = HARD.module()
    monkeypatch.setattr(truth, "RUN_S", 0.0)
    point = default_point()
    finals = []
    for seed in range(300):
        monkeypatch.setenv("AUTORESEARCH_SEED", str(seed))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            truth.report(point)
        finals.append(float(out.getvalue().splitlines()[-1].split(": ")[1]))
    assert statistics.fmean(finals) == pytest.approx(truth.true_loss(point), abs=0.01)
    assert 0.8 * truth.NOISE < statistics.stdev(finals) < 1.2 * truth.NOISE
    # a bigger model ends better and starts slower: its curve crosses the default's
    big = {**point, "N_EMBD": 384, "N_HEAD": 6, "N_LAYER": 6}
    ends = truth.true_loss(big), truth.true_loss(point)
    assert ends[0] < ends[1]
    assert truth.curve_at(ends[0], truth.shape(big), 0.3) > \
        truth.curve_at(ends[1], truth.shape(point), 0.3)


def test_a_tiny_night_on_the_hard_surface_proposes_valid_points_within_its_budget(
        tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    seen = {}

    def inspect(repo: Path, ledger: Path):
        events = [json.loads(x) for x in
                  (repo / ".autoresearch/night/journal.jsonl").read_text().splitlines()]
        commits = [e["commit"] for e in events if e["event"] == "end" and e["commit"]]
        seen["points"] = [constants({"train.py": sn.git(repo, "show", f"{c}:surface/train.py")})
                          for c in commits]
        seen["runs"] = len(sc.ledger_runs(ledger))

    night = sc.one_night(HARD, "tune", "on", 0, 6, 0.02, "true", 4, inspect=inspect)
    assert len(seen["points"]) >= 3                    # the baseline and at least two ideas
    for point in seen["points"]:
        assert valid(point, space()) is None, point
    assert night.compute <= 6 and night.points and night.points[-1][0] == night.compute
    assert seen["runs"] > 6                             # ended once the budget was spent
    assert night.base == HARD.module().true_loss(default_point())
    last = night.keeps[-1] if night.keeps else night.base
    assert night.gain_at(6) == pytest.approx(night.base - last)
