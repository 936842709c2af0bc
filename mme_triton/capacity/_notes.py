"""What a plan says of its traffic itself, whatever the instances: compulsory misses too many for the
targets, and the length of traffic at which they would matter no more."""

from __future__ import annotations

from collections.abc import Mapping

from mme_triton.capacity.traffic import Traffic

__all__ = ["compulsory_notes"]


def compulsory_notes(traffic: Traffic, targets: Mapping[str, float | None]) -> list[str]:
    """What the traffic's compulsory misses — the first request of every model, which no plan can serve
    from memory — do to the targets, when they are too many for them: more than the 1 % of the requests a
    p99 leaves out (the p99 is then a cold start, whatever the plan), or more than the misses the hit-ratio
    target allows; and the duration of this traffic at which they would fall under that share."""
    requests, models = len(traffic), len(traffic.names)
    if not requests or traffic.duration <= 0:
        return []
    share = models / requests
    rate = requests / traffic.duration
    notes = []
    if targets.get("p99_s") is not None and share > 0.01:
        notes.append(
            f"{models:,} models' first requests are compulsory misses: {share:.1%} of the {requests:,} "
            f"requests, more than the 1% a p99 leaves out, so every plan's p99 is a cold start. At this "
            f"traffic's rate ({rate:,.2f}/s) they fall under 1% after {_span(models / (0.01 * rate))}: "
            "plan with a traffic that long to see the steady state"
        )
    min_hit_ratio = targets.get("min_hit_ratio")
    if min_hit_ratio is not None and min_hit_ratio < 1 and 1 - share < min_hit_ratio:
        notes.append(
            f"the compulsory misses ({models:,} models' first requests) cap the hit ratio of this traffic at "
            f"{1 - share:.3f}, under the {min_hit_ratio:g} asked; they fall under {1 - min_hit_ratio:.1%} of "
            f"the requests after {_span(models / ((1 - min_hit_ratio) * rate))} of it"
        )
    return notes


def _span(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
