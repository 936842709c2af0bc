"""Plans: every type × count simulated, the targets checked, the cheapest that meets them chosen."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mme_triton import INSTANCE_TYPES, CapacityPlan, InstanceType, ModelProfile, Traffic, plan_capacity
from mme_triton.capacity.plan import PlanRow

GiB = 1024**3
CONTRACT = {
    "instance_type",
    "instance_count",
    "hit_ratio",
    "loads",
    "unloads",
    "load_wait_p99_s",
    "p50_s",
    "p99_s",
    "cost_per_hour",
    "meets_targets",
}


@pytest.fixture(scope="module")
def models() -> list[ModelProfile]:
    # six 6 GiB models: an ml.g5.xlarge (21.9 GiB for models) holds three
    return [ModelProfile("m.tar.gz", memory_bytes=6 * GiB, cold_start_s=8.0, service_time_s=0.02, copies=6)]


@pytest.fixture(scope="module")
def traffic(models: list[ModelProfile]) -> Traffic:
    return Traffic.zipf(models, s=1.2, rate=5, duration=600, seed=0)


def test_plan_capacity_rows_have_the_contract_fields_per_type_and_count(
    models: list[ModelProfile], traffic: Traffic
) -> None:
    plan = plan_capacity(
        models, traffic, instance_types=["ml.g5.xlarge", "ml.g5.2xlarge"], instance_counts=(2, 1)
    )
    assert [(row.instance_type, row.instance_count) for row in plan.rows] == [
        ("ml.g5.xlarge", 1),
        ("ml.g5.xlarge", 2),
        ("ml.g5.2xlarge", 1),
        ("ml.g5.2xlarge", 2),
    ]
    assert set(plan.rows[0].to_dict()) >= CONTRACT
    one, two = plan.rows[:2]
    assert one.hit_ratio < two.hit_ratio and (two.loads, two.unloads) == (6, 0)
    # requests that arrive while their model loads are misses too (CloudWatch's ModelCacheHit)
    assert two.misses > 6
    assert one.cost_per_hour == pytest.approx(1.4084) and two.cost_per_hour == pytest.approx(2 * 1.4084)
    assert two.cost_per_million == pytest.approx(2 * 1.4084 / 6 / two.requests * 1e6)
    assert two.loads_per_min == pytest.approx(6 / 10)
    assert two.memory_headroom_bytes == INSTANCE_TYPES["ml.g5.xlarge"].memory_budget_bytes - 3 * 6 * GiB


def test_plan_capacity_best_is_the_cheapest_that_meets_the_targets(
    models: list[ModelProfile], traffic: Traffic
) -> None:
    plan = plan_capacity(
        models,
        traffic,
        instance_types=["ml.g5.xlarge", "ml.g5.2xlarge"],
        instance_counts=(1, 2, 3),
        min_hit_ratio=0.95,
    )
    assert plan.best is not None
    assert (plan.best.instance_type, plan.best.instance_count) == ("ml.g5.xlarge", 2)
    failing = [row for row in plan.rows if not row.meets_targets]
    assert {(row.instance_type, row.instance_count) for row in failing} == {
        ("ml.g5.xlarge", 1),
        ("ml.g5.2xlarge", 1),
    }
    assert all(row.reason.startswith("hit ratio 0.") and "< 0.95" in row.reason for row in failing)


def test_plan_capacity_names_each_target_a_plan_misses(models: list[ModelProfile], traffic: Traffic) -> None:
    plan = plan_capacity(
        models,
        traffic,
        instance_types=["ml.g5.xlarge"],
        instance_counts=[1],
        min_hit_ratio=0.99,
        p99="200ms",
        max_cost=1.0,
    )
    [row] = plan.rows
    assert not row.meets_targets and plan.best is None
    assert "hit ratio" in row.reason and "p99 " in row.reason and "> 200 ms" in row.reason
    assert "$1.41/h > $1.00/h" in row.reason


def test_plan_capacity_without_prices_chooses_the_smallest(
    models: list[ModelProfile], traffic: Traffic
) -> None:
    unpriced = [
        dataclasses.replace(INSTANCE_TYPES[name], price_per_hour=None)
        for name in ("ml.g5.2xlarge", "ml.g6e.xlarge")
    ]
    plan = plan_capacity(models, traffic, instance_types=unpriced, instance_counts=(1, 2), min_hit_ratio=0.9)
    assert plan.best is not None
    # ml.g6e.xlarge's 44 GiB hold all six models: one instance beats two of the 21.9 GiB type
    assert (plan.best.instance_type, plan.best.instance_count) == ("ml.g6e.xlarge", 1)
    with_cost_target = plan_capacity(
        models, traffic, instance_types=unpriced[:1], instance_counts=[2], max_cost=9
    )
    assert with_cost_target.rows[0].reason == "no price for ml.g5.2xlarge to compare with max_cost"


def test_plan_capacity_counts_failed_requests_against_a_plan() -> None:
    big = ModelProfile("big.tar.gz", memory_bytes=30 * GiB, cold_start_s=10.0, service_time_s=0.05)
    plan = plan_capacity(
        [big], Traffic.trace([(0.0, "big.tar.gz")]), instance_types=["ml.g5.xlarge"], instance_counts=[1]
    )
    assert plan.rows[0].reason == "1 requests failed (too_large 1)"
    assert plan.best is None


def test_plan_capacity_is_repeatable(models: list[ModelProfile], traffic: Traffic) -> None:
    plans = [
        plan_capacity(models, traffic, instance_types=["ml.g5.xlarge"], instance_counts=(2, 3), seed=4)
        for _ in "ab"
    ]
    assert plans[0].to_dict() == plans[1].to_dict()


def test_capacity_plan_json_and_csv_round_trip(
    tmp_path: Path, models: list[ModelProfile], traffic: Traffic
) -> None:
    plan = plan_capacity(
        models, traffic, instance_types=["ml.g5.xlarge", "ml.g6e.xlarge"], instance_counts=(1, 2), p99=0.5
    )
    again = CapacityPlan.from_json(plan.to_json(tmp_path / "plan.json"))
    assert again.rows == plan.rows and again.targets == plan.targets == {
        "min_hit_ratio": None,
        "p99_s": 0.5,
        "max_cost": None,
    }
    assert CapacityPlan.from_json(tmp_path / "plan.json").to_dict() == plan.to_dict()
    assert plan.to_dict()["models"][0]["copies"] == 6
    plan.to_csv(tmp_path / "plan.csv")
    assert CapacityPlan.read_csv(tmp_path / "plan.csv") == list(plan.rows)
    assert plan.to_csv().splitlines()[0].startswith("instance_type,instance_count,requests,hit_ratio,")
    with pytest.raises(ValueError, match="not a capacity plan's JSON"):
        CapacityPlan.from_json('{"rows": 3}')


def test_capacity_plan_reads_as_a_table_with_the_best_marked(
    models: list[ModelProfile], traffic: Traffic
) -> None:
    plan = plan_capacity(
        models, traffic, instance_types=["ml.g5.xlarge"], instance_counts=(1, 2), min_hit_ratio=0.95
    )
    text = str(plan)
    assert "2 x ml.g5.xlarge *" in text and "best: 2 x ml.g5.xlarge" in text
    assert "no: hit ratio" in text and "targets: hit ratio >= 0.95" in text
    html = plan._repr_html_()
    assert html.count("<tr") == 3 and 'style="font-weight: bold"' in html


def test_capacity_plan_plot_draws_hit_ratio_and_p99_per_type(
    models: list[ModelProfile], traffic: Traffic
) -> None:
    pytest.importorskip("matplotlib")
    plan = plan_capacity(
        models,
        traffic,
        instance_types=["ml.g5.xlarge", "ml.g5.2xlarge"],
        instance_counts=(1, 2),
        min_hit_ratio=0.9,
    )
    figure = plan.plot()
    assert figure._repr_png_().startswith(b"\x89PNG")  # a notebook cell ending with it shows the plot
    hit_axes, p99_axes, busy_axes, cost_axes = figure.axes
    # the two g5 sizes have the same GPU memory for models: the same results, which the legend says
    assert [line.get_label() for line in p99_axes.get_lines()][:2] == [
        "ml.g5.xlarge",
        "ml.g5.2xlarge (hit ratio, p99 as ml.g5.xlarge)",
    ]
    assert list(hit_axes.get_lines()[0].get_ydata()) == [plan.rows[0].hit_ratio, plan.rows[1].hit_ratio]
    assert list(cost_axes.get_lines()[0].get_ydata()) == [
        plan.rows[0].cost_per_hour,
        plan.rows[1].cost_per_hour,
    ]
    assert list(busy_axes.get_lines()[0].get_ydata()) == [
        plan.rows[0].processor_utilization,
        plan.rows[1].processor_utilization,
    ]


def _row(template: PlanRow, kind: str, count: int, hit_ratio: float, p99: float, cost: float) -> PlanRow:
    """``template`` with these figures (a plan meets the 0.9 hit-ratio target of the test below or not)."""
    meets = hit_ratio >= 0.9
    return dataclasses.replace(
        template, instance_type=kind, instance_count=count, hit_ratio=hit_ratio, p99_s=p99,
        cost_per_hour=cost, meets_targets=meets, reason="" if meets else "hit ratio",
    )  # fmt: skip


def test_capacity_plan_plot_keeps_types_with_the_same_results_apart_and_plots_cost(
    models: list[ModelProfile], traffic: Traffic
) -> None:
    """ml.m5.xlarge and ml.c5.2xlarge hold the same models (same memory for them): the same hit ratio and
    p99 at every count, told apart by the plot; their costs differ, and cost chose the winner."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    template = plan_capacity(models, traffic, instance_types=["ml.g5.xlarge"], instance_counts=(1,)).rows[0]
    rows = [
        _row(template, kind, count, hit, p99, price * count)
        for kind, price in (("ml.m5.xlarge", 0.23), ("ml.c5.2xlarge", 0.408), ("ml.m5.2xlarge", 0.4))
        for count, (hit, p99) in zip((1, 2), ((0.8, 4.0), (0.95, 0.5)) if kind != "ml.m5.2xlarge" else
                                     ((0.9, 1.0), (0.99, 0.2)), strict=True)
    ]  # fmt: skip
    plan = CapacityPlan(tuple(rows), {"min_hit_ratio": 0.9, "p99_s": None, "max_cost": None}, {}, ())
    assert (plan.best.instance_type, plan.best.instance_count, plan.best_basis) == (
        "ml.m5.2xlarge",
        1,
        "cost",
    )

    figure = plan.plot()

    hit_axes, p99_axes, _busy_axes, cost_axes = figure.axes
    for axes in (hit_axes, p99_axes):
        m5, c5 = axes.get_lines()[0], axes.get_lines()[1]
        assert list(m5.get_ydata()) == list(c5.get_ydata())  # the same results ...
        assert all(a != b for a, b in zip(m5.get_xdata(), c5.get_xdata(), strict=True))  # ... drawn apart
        assert (m5.get_marker(), m5.get_linestyle()) != (c5.get_marker(), c5.get_linestyle())
    legend = figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()][:2] == [
        "ml.m5.xlarge",
        "ml.c5.2xlarge (hit ratio, p99 as ml.m5.xlarge)",
    ]
    assert "cheapest" in cost_axes.get_title()
    assert [list(line.get_ydata()) for line in cost_axes.get_lines()][:3] == [
        [0.23, 0.46], [0.408, 0.816], [0.4, 0.8]
    ]  # fmt: skip
    assert "best: 1 x ml.m5.2xlarge" in figure.get_suptitle()
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    assert all(axes.get_legend() is None for axes in figure.axes)
    assert not any(
        legend.get_window_extent(renderer).overlaps(a.get_window_extent(renderer)) for a in figure.axes
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"min_hit_ratio": 1.5}, "min_hit_ratio must be between 0 and 1"),
        ({"p99": "soon"}, "p99: not a duration"),
        ({"max_cost": -1}, "max_cost"),
        ({"instance_counts": [0]}, "an instance count is an integer from 1 to 255"),
        ({"instance_counts": []}, "instance_counts is empty"),
        ({"instance_types": ["ml.g5.xlarge", "ml.g5.xlarge"]}, "given twice"),
        ({"instance_types": ["ml.g9.xlarge"]}, r"no hardware figures for instance type 'ml\.g9\.xlarge'"),
        ({"instance_types": []}, "instance_types is empty"),
    ],
    ids=["hit-ratio", "p99", "cost", "zero-count", "no-counts", "twice", "unknown-type", "no-types"],
)
def test_plan_capacity_refuses_bad_options(
    models: list[ModelProfile], traffic: Traffic, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        plan_capacity(models, traffic, **options)  # type: ignore[arg-type]


def test_plan_row_is_a_record() -> None:
    fields = {f.name for f in dataclasses.fields(PlanRow)}
    assert (
        fields >= CONTRACT
        and {"reason", "loads_per_min", "cost_per_million", "memory_headroom_bytes"} <= fields
    )
    assert isinstance(INSTANCE_TYPES["ml.g5.xlarge"], InstanceType)


def test_plan_capacity_fails_a_plan_whose_processors_are_past_full() -> None:
    """100 models x 0.2 s per request at 400 requests/s is 80 CPU-seconds per second: two ml.c5.xlarge
    (4 vCPUs each) cannot run it, whatever their memory; ten ml.c5.4xlarge (16 vCPUs each) can."""
    model = ModelProfile("m.tar.gz", memory_bytes=2**20, cold_start_s=1.0, service_time_s=0.2, copies=100)
    traffic = Traffic.uniform([model], rate=400, duration=60, seed=0)
    plan = plan_capacity(
        [model], traffic, instance_types=["ml.c5.xlarge", "ml.c5.4xlarge"], instance_counts=[2, 10], p99="2s"
    )
    small = next(row for row in plan.rows if row.instance_type == "ml.c5.xlarge" and row.instance_count == 2)
    assert small.processors == 4
    assert small.processor_utilization > 9  # 40 CPU-seconds per second on each 4-vCPU instance
    assert not small.meets_targets and "processors" in small.reason and "of the 4 vCPUs" in small.reason
    large = next(
        row for row in plan.rows if row.instance_type == "ml.c5.4xlarge" and row.instance_count == 10
    )
    assert large.processors == 16 and large.processor_utilization < 0.7
    assert large.meets_targets, large.reason
    assert plan.best is not None and plan.best.instance_type == "ml.c5.4xlarge"
    assert "processor_utilization" in plan.to_csv().splitlines()[0]
    assert "CPU/GPU busy" in str(plan)


def test_plan_capacity_says_when_the_traffic_is_too_short_for_its_compulsory_misses() -> None:
    """200 models' first loads in ten minutes at 20 requests/s are 1.7 % of the requests: every p99 is a
    cold start; at 1 % a p99 leaves out they matter no more after 200 / (0.01 x 20/s) = 1000 s."""
    model = ModelProfile("m.tar.gz", memory_bytes=2**20, cold_start_s=5.0, service_time_s=0.01, copies=200)
    traffic = Traffic.uniform([model], rate=20, duration=600, seed=0)
    plan = plan_capacity([model], traffic, instance_types=["ml.c5.xlarge"], instance_counts=[1], p99="1s")
    assert plan.best is None
    assert len(plan.notes) == 1
    note = plan.notes[0]
    assert "200 models' first requests are compulsory misses" in note and "1.7%" in note
    assert "after 17 min" in note  # 1000 s
    assert f"note: {note}" in str(plan)
    assert CapacityPlan.from_json(plan.to_json()).notes == plan.notes
    longer = Traffic.uniform([model], rate=20, duration=3600, seed=0)
    assert (
        plan_capacity([model], longer, instance_types=["ml.c5.xlarge"], instance_counts=[1], p99="1s").notes
        == ()
    )


def test_plan_capacity_says_when_compulsory_misses_cap_the_hit_ratio() -> None:
    model = ModelProfile("m.tar.gz", memory_bytes=2**20, cold_start_s=5.0, service_time_s=0.01, copies=200)
    traffic = Traffic.uniform([model], rate=20, duration=600, seed=0)
    plan = plan_capacity(
        [model], traffic, instance_types=["ml.c5.xlarge"], instance_counts=[1], min_hit_ratio=0.99
    )
    assert len(plan.notes) == 1 and "cap the hit ratio of this traffic at 0.98" in plan.notes[0]
