"""``metrics``: what an endpoint is doing, from CloudWatch; and the health line ``status`` prints."""

from __future__ import annotations

import argparse
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

from mme_triton.cli._common import SubParsers, add_command, aws_session, duration, emit, err

__all__ = ["health_line", "recent_metrics", "register"]

logger = logging.getLogger(__name__)

HEALTH_WINDOW = timedelta(hours=1)


def _metrics(args: argparse.Namespace) -> int:
    from mme_triton.endpoint.metrics import endpoint_metrics

    metrics = endpoint_metrics(
        args.endpoint_name,
        start=args.since,
        period=args.period,
        variant=args.variant,
        components=args.component or None,
        boto3_session=aws_session(args),
        timeout=args.timeout.total_seconds(),
    )
    if args.csv is not None:
        metrics.to_csv(args.csv)
    if args.plot is not None:
        metrics.plot(args.plot)
        if not getattr(args, "quiet", False):
            err(f"plot written to {args.plot}")
    emit(args, str(metrics), metrics.to_dict())
    return 0


def recent_metrics(endpoint_name: str, session: Any) -> Any:
    """The last hour's summary of an endpoint's metrics, ``None`` when CloudWatch has none or cannot be read
    (logged: ``status`` reports the endpoint whether or not its metrics can be read)."""
    from mme_triton.endpoint.metrics import endpoint_metrics
    from mme_triton.errors import EndpointError

    try:
        metrics = endpoint_metrics(
            endpoint_name, start=HEALTH_WINDOW, period=300, boto3_session=session, timeout=30
        )
    except EndpointError as exc:
        logger.warning("no metrics for %s: %s", endpoint_name, exc)
        return None
    return metrics.summary() if metrics.has_data else None


def health_line(summary: dict[str, Any]) -> str:
    """``last hour: 1,204 invocations, cache-hit ratio 93.0%, 12 loads, 9 unloads, 0 5xx``."""
    ratio = summary["cache_hit_ratio"]
    ratio_text = f"{ratio:.1%}" if ratio is not None else "-"
    return (
        f"  last hour        {summary['invocations']:,} invocations, cache-hit ratio {ratio_text}, "
        f"{summary['loads']:,} loads, {summary['unloads']:,} unloads, {summary['errors_5xx']:,} 5xx"
    )


def register(sub: SubParsers) -> None:
    """Add the ``metrics`` subcommand."""
    p = add_command(
        sub,
        "metrics",
        help="an endpoint's CloudWatch metrics: invocations, cache hits, model loads and unloads, latencies",
        examples=[
            "mme-triton metrics my-endpoint",
            "mme-triton metrics my-endpoint --since 6h --period 5m --plot metrics.png",
            "mme-triton metrics my-endpoint --since 15m --period 1s --json  # the stack at 1 s metrics",
            "mme-triton metrics my-components --component linear",
        ],
        handler=_metrics,
        aws=True,
    )
    p.add_argument("endpoint_name", metavar="ENDPOINT")
    p.add_argument("--since", type=duration, default=duration("1h"), help="how far back to read (1h)")
    p.add_argument(
        "--period",
        type=duration,
        default=duration("1m"),
        help="seconds per data point: 1s, 5s, 10s, 20s, 30s or whole minutes (1m)",
    )
    p.add_argument("--variant", help="one production variant (default: every variant of the endpoint)")
    p.add_argument(
        "--component",
        action="append",
        default=[],
        metavar="NAME",
        help="an inference component to read (default: every component of an endpoint of components)",
    )
    p.add_argument("--plot", type=Path, metavar="FILE", help="draw the metrics to FILE (png, svg, pdf ...)")
    p.add_argument("--csv", type=Path, metavar="FILE", help="write every data point to FILE as CSV")
    p.add_argument(
        "--timeout",
        type=duration,
        default=duration("2m"),
        help="how long reads are retried while AWS throttles or cannot be reached (2m)",
    )
