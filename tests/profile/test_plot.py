"""The report's figure: which model, axes that span the measurements, labels that do not pile up, legends
off the data, and the cold start's parts readable however thin their bars."""

from __future__ import annotations

from typing import Any

import pytest

from mme_triton import Candidate, ProfileReport
from mme_triton.profile.load import Level
from mme_triton.profile.report import CandidateResult, Constraints

pytest.importorskip("matplotlib")


def _level(concurrency: int, throughput: float, p99: float) -> Level:
    """A stable level: its p99 and throughput, the other percentiles below the p99."""
    return Level(concurrency, None, True, throughput, p99 / 2, p99 * 0.8, p99 * 0.9, p99, p99 / 2, 300, 0)


def _result(name: str, model_dir: str, levels: list[Level], cold: float = 2.0) -> CandidateResult:
    return CandidateResult(
        name=name,
        candidate=Candidate(name),
        model_dir=model_dir,
        cold_start_s=cold,
        download_s=0.012,
        extract_s=0.031,
        load_s=cold - 0.2,
        levels=levels,
    )


def _report(budget_ms: float | None) -> ProfileReport:
    """Four candidates of two models whose c=1 points fall together (as the stack measures a model whose
    first level is bound by the route), then part ways at c=4."""
    results = [
        _result(f"resnet-{index}", "repo/resnet", [_level(1, 400 + index, 5.0 + 0.05 * index),
                                                   _level(4, 900 + 150 * index, 20.0 + 5 * index)])
        for index in range(3)
    ]  # fmt: skip
    results.append(_result("bert-as-is", "repo/bert", [_level(1, 401, 5.1), _level(4, 700, 40.0)], cold=4.0))
    return ProfileReport(results, constraints=Constraints(latency_budget_ms=budget_ms), target="stack")


def _texts(axes: Any) -> list[str]:
    return [text.get_text() for text in axes.texts]


def _drawn(figure: Any) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return canvas.get_renderer()


def test_profile_plot_names_the_models_profiled() -> None:
    figure = _report(100.0).plot()

    title = figure.get_suptitle()
    assert title.startswith("profile of resnet, bert: 4 candidate(s) on stack")
    assert "p99 <= 100 ms" in title
    assert figure._repr_png_().startswith(b"\x89PNG")  # a notebook cell ending with it shows the plot


def test_profile_plot_budget_beyond_the_measurements_does_not_stretch_the_axis() -> None:
    beyond, within = _report(5000.0).plot(), _report(30.0).plot()

    high = beyond.axes[0].get_xlim()[1]
    assert high < 100  # the measurements reach 40 ms: the axis ends there, not at 5000
    assert not [line for line in beyond.axes[0].get_lines() if list(line.get_xdata()) == [5000.0, 5000.0]]
    assert "p99 budget 5000 ms: beyond every measurement" in beyond.axes[0].get_title()
    assert [list(line.get_xdata()) for line in within.axes[0].get_lines()][-1] == [30.0, 30.0]


def test_profile_plot_writes_a_load_label_once_where_points_fall_together() -> None:
    figure = _report(None).plot()

    labels = _texts(figure.axes[0])
    assert labels.count("c=1") == 1  # four candidates' c=1 points in one spot
    assert labels.count("c=4") == 4  # apart at c=4, each labelled
    renderer = _drawn(figure)
    boxes = [text.get_window_extent(renderer) for text in figure.axes[0].texts]
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if a.overlaps(b)]


def test_profile_plot_legends_sit_off_the_data() -> None:
    figure = _report(30.0).plot()
    renderer = _drawn(figure)

    for axes in figure.axes:
        legend = axes.get_legend()
        assert legend is not None
        assert not legend.get_window_extent(renderer).overlaps(axes.get_window_extent(renderer))


def test_profile_plot_shows_the_cold_start_parts_in_figures() -> None:
    figure = _report(None).plot()

    texts = _texts(figure.axes[1])
    assert texts[0].split() == ["total", "s", "download", "extract", "load"]
    assert texts[1].split() == ["2.00", "0.012", "0.031", "1.80"]
    assert texts[-1].split() == ["4.00", "0.012", "0.031", "3.80"]
