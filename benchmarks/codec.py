"""Codec throughput: mme_triton's encoder/decoder against tritonclient's and a plain numpy memcpy.

Run: ``python benchmarks/codec.py`` (options: ``--size-mb``, ``--json-size-mb``, ``--response-mb``,
``--runs``, ``--seconds``; ``--check`` exits with status 1 when a goal is missed).

How it measures (the machine may be shared and busy; both sides must meet the same load):

- Every row is measured in ``--runs`` runs (at least 5, default 7). In a run, ours and tritonclient's
  calls (and the other backends of the row) take turns, one call each per round, the order rotating
  from round to round; a run has as many rounds as fit in about
  ``--seconds``, and at least three. Each call is timed alone with ``time.perf_counter_ns``, after a
  ``gc.collect()``; a side's time in a run is the median of its calls.
- A run's ratio is tritonclient's time over ours in that run. The table shows the median over the
  runs and the **worst** run; a goal is met only when the worst run meets it. MB/s are megabytes
  (10**6) of tensor data per second, from the median run.
- ``cpu`` is the median ratio of the CPU time each call spent (``time.thread_time_ns``, same calls):
  the time other processes take from a call does not count there, so it shows how much of a low
  ratio is the machine's load (the goals still judge the wall-clock ratio).
- Nothing is pinned or tuned: the process runs as a user's would.

The binary rows use a tensor of ``--size-mb`` (default 64 MB): a body of that size is always fresh
memory from the kernel (glibc maps blocks over 32 MB anew each time), which is where the encoder's huge
pages pay. Between 4 and 32 MB glibc may hand both sides recycled memory instead, and the encode ratio
falls to the number of copies: one for the codec, two for tritonclient (``tobytes()``, then
``b"".join``).

What each side does (the same job): an encode ends with the body a caller sends (bytes-like, ready for
``invoke_endpoint``, holding a copy of the tensor): ours ``encode_request``, tritonclient's
``InferInput.set_data_from_numpy`` + ``InferenceServerClient.generate_request_body``. A decode starts
from the body and ends with the numpy array of the tensor's dtype and shape: ours ``decode_response``,
tritonclient's ``InferenceServerClient.parse_response_body`` + ``InferResult.as_numpy``; each decoder's
result is checked against the tensor that was written before it is timed.

JSON rows name the backend: ``simdjson`` decodes with pysimdjson (numeric data to numpy in C),
``orjson`` with orjson, ``json`` with the standard library alone (encoding: orjson or ``json``).
orjson and pysimdjson are dependencies of the package, so the goals apply to the rows that use them;
the ``fallback`` rows show what a platform without their wheels gets. The JSON response is written the
way Triton writes one (FP32 values as float64 text, flat ``data``).

The ``pysimdjson alone`` rows time what the JSON decoder cannot do without: pysimdjson parsing only
the tensor's ``data`` array (cut out of the body beforehand) to float64 with one reused parser, then
the cast to float32 - no header, no checks, no bounded buffers. Its ratio is the ceiling of the
``simdjson`` row's: every number must be parsed from text, and tritonclient's decoder (python-rapidjson
to Python floats, then numpy) is only that many times slower than the parser.

JSON sizes: InvokeEndpoint carries at most 6 MB each way, so the largest FP32 tensor that ever travels
as JSON is about 1 MB (``--response-mb``, a 5 MB response). The larger JSON rows (``--json-size-mb``,
default 8 MB of FP32, a 39 MB body) show that speed holds beyond that.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tritonclient.http as httpclient

from mme_triton.client import _json
from mme_triton.client.codec import decode_response, encode_request, encode_response

Client = httpclient.InferenceServerClient
MIN_RUNS = 5
MIN_ROUNDS = 3  # calls per side in a run, however slow: one slow call alone does not make a run


@dataclass(frozen=True)
class Contender:
    """One side of a row: what it runs, and what to switch before each call (outside the timing)."""

    name: str
    run: Callable[[], Any]
    prepare: Callable[[], None] | None = None


def timed(contender: Contender) -> tuple[int, int]:
    """One call's wall-clock and CPU time (this thread's), in nanoseconds."""
    if contender.prepare is not None:
        contender.prepare()
    gc.collect()
    start, cpu = time.perf_counter_ns(), time.thread_time_ns()
    result = contender.run()
    elapsed, cpu = time.perf_counter_ns() - start, time.thread_time_ns() - cpu
    del result
    return elapsed, cpu


# Per run: each contender's median wall-clock and median CPU time, in seconds.
Run = dict[str, tuple[float, float]]


def measure(contenders: Sequence[Contender], runs: int, seconds: float) -> list[Run]:
    """Each run's medians (the contenders' calls interleaved, see the module doc)."""
    first = sum(timed(c)[0] for c in contenders)  # first calls (parsers, caches) are not counted
    rounds = max(MIN_ROUNDS, round(seconds * 1e9 / first))
    results: list[Run] = []
    for _ in range(runs):
        times: dict[str, list[tuple[int, int]]] = {c.name: [] for c in contenders}
        for turn in range(rounds):
            shift = turn % len(contenders)
            for contender in [*contenders[shift:], *contenders[:shift]]:
                times[contender.name].append(timed(contender))
        results.append(
            {
                name: (
                    statistics.median(t[0] for t in calls) / 1e9,
                    statistics.median(t[1] for t in calls) / 1e9,
                )
                for name, calls in times.items()
            }
        )
    return results


@dataclass(frozen=True)
class Row:
    name: str
    nbytes: int
    ours: float  # seconds, median run
    theirs: float
    memcpy: float | None
    ratio_median: float
    ratio_worst: float
    ratio_cpu: float
    goal: float | None


def make_row(name: str, nbytes: int, results: list[Run], ours: str, goal: float | None) -> Row:
    ratios = [run["tritonclient"][0] / run[ours][0] for run in results]
    cpu_ratios = [run["tritonclient"][1] / max(run[ours][1], 1e-9) for run in results]
    memcpy = [run["memcpy"][0] for run in results if "memcpy" in run]
    return Row(
        name=name,
        nbytes=nbytes,
        ours=statistics.median(run[ours][0] for run in results),
        theirs=statistics.median(run["tritonclient"][0] for run in results),
        memcpy=statistics.median(memcpy) if memcpy else None,
        ratio_median=statistics.median(ratios),
        ratio_worst=min(ratios),
        ratio_cpu=statistics.median(cpu_ratios),
        goal=goal,
    )


def tc_encode(array: np.ndarray[Any, Any], binary: bool) -> bytes:
    tensor = httpclient.InferInput("x", list(array.shape), "FP32")
    tensor.set_data_from_numpy(array, binary_data=binary)
    body, _ = Client.generate_request_body([tensor])
    return body  # type: ignore[no-any-return]


def tc_decode(body: bytes, header_size: int | None) -> np.ndarray[Any, Any]:
    return Client.parse_response_body(body, header_length=header_size).as_numpy("y")  # type: ignore[no-any-return]


def triton_json_response(array: np.ndarray[Any, Any]) -> tuple[bytes, str]:
    """A JSON response as Triton writes it: FP32 values printed as the shortest text of the float64."""
    saved = _json.use_orjson
    _json.use_orjson = False  # the standard library prints floats the way Triton's writer does
    try:
        body, content_type = encode_response({"y": array}, binary=False, model_name="m", model_version="1")
    finally:
        _json.use_orjson = saved
    return bytes(body), content_type


def check_decoded(decoded: np.ndarray[Any, Any], array: np.ndarray[Any, Any], who: str) -> None:
    """A decode row counts only if it gave back exactly the tensor that was written."""
    if decoded.dtype != array.dtype or decoded.shape != array.shape or not np.array_equal(decoded, array):
        raise SystemExit(f"{who} did not decode the tensor that was written")


def check_body(body: Any, expected: bytes, who: str) -> None:
    """An encode row counts only if it gave a body boto3 sends that holds what tritonclient's holds."""
    if not isinstance(body, (bytes, bytearray)) or body != expected:
        raise SystemExit(f"{who} did not encode the request tritonclient encodes")


def header_size(content_type: str) -> int | None:
    return int(content_type.rpartition("=")[2]) if "json-header-size" in content_type else None


def backend_switch(backend: str, decoding: bool) -> Callable[[], None]:
    def prepare() -> None:
        _json.use_simdjson = decoding and backend == "simdjson"
        _json.use_orjson = backend in ("simdjson", "orjson")

    return prepare


def binary_rows(array: np.ndarray[Any, Any], runs: int, seconds: float) -> list[Row]:
    size = f"{array.nbytes / 1e6:g} MB"
    ours_body, _ = encode_request({"x": array})
    tc_body = tc_encode(array, True)
    # The headers differ only in the order of their keys; the tensor bytes must be the same.
    check_body(ours_body[-array.nbytes :], tc_body[-array.nbytes :], "encode_request")
    del ours_body, tc_body
    memcpy = Contender("memcpy", array.copy)
    encode = measure(
        [
            Contender("ours", lambda: encode_request({"x": array})),
            Contender("tritonclient", lambda: tc_encode(array, True)),
            memcpy,
        ],
        runs,
        seconds,
    )
    rows = [make_row(f"binary encode ({size})", array.nbytes, encode, "ours", 2.0)]

    encoded, content_type = encode_response({"y": array})
    body = bytes(encoded)
    del encoded
    length = header_size(content_type)
    check_decoded(decode_response(body, content_type)["y"], array, "decode_response")
    check_decoded(tc_decode(body, length), array, "tritonclient")
    decode = measure(
        [
            Contender("ours", lambda: decode_response(body, content_type)),
            Contender("copy", lambda: decode_response(body, content_type, copy=True)),
            Contender("tritonclient", lambda: tc_decode(body, length)),
            memcpy,
        ],
        runs,
        seconds,
    )
    rows.append(make_row(f"binary decode ({size}, views)", array.nbytes, decode, "ours", 20.0))
    rows.append(make_row("binary decode, copy=True", array.nbytes, decode, "copy", None))
    return rows


def json_rows(
    array: np.ndarray[Any, Any],
    encoders: tuple[str, ...],
    decoders: tuple[str, ...],
    runs: int,
    seconds: float,
) -> list[Row]:
    size = f"{array.nbytes / 1e6:g} MB"
    rows: list[Row] = []

    def label(what: str, backend: str, primary: bool) -> str:
        return f"JSON {what} ({size}, {backend}{'' if primary else ', fallback'})"

    contenders = [Contender("tritonclient", lambda: tc_encode(array, False))]
    for backend in encoders:
        contenders.append(
            Contender(
                backend, lambda: encode_request({"x": array}, binary=False), backend_switch(backend, False)
            )
        )
    results = measure(contenders, runs, seconds)
    for index, backend in enumerate(encoders):
        goal = 10.0 if index == 0 else None
        rows.append(make_row(label("encode", backend, index == 0), array.nbytes, results, backend, goal))

    body, content_type = triton_json_response(array)
    check_decoded(tc_decode(body, None), array, "tritonclient")
    contenders = [Contender("tritonclient", lambda: tc_decode(body, None))]
    for backend in decoders:
        backend_switch(backend, True)()
        check_decoded(decode_response(body, content_type)["y"], array, backend)
        contenders.append(
            Contender(backend, lambda: decode_response(body, content_type), backend_switch(backend, True))
        )
    if "simdjson" in decoders:
        contenders.append(Contender("parser", simdjson_alone(body)))
    results = measure(contenders, runs, seconds)
    for index, backend in enumerate(decoders):
        goal = 10.0 if index == 0 else None
        rows.append(make_row(label("decode", backend, index == 0), array.nbytes, results, backend, goal))
    if "simdjson" in decoders:
        rows.append(
            make_row(f"  pysimdjson alone ({size}, see --help)", array.nbytes, results, "parser", None)
        )
    return rows


def simdjson_alone(body: bytes) -> Callable[[], np.ndarray[Any, Any]]:
    """The parser's own floor: only the tensor's ``data`` array (cut out beforehand), parsed by a
    reused pysimdjson parser straight to float64 and cast to float32 - no header, no checks."""
    import simdjson

    start = body.index(b"[", body.index(b'"data"'))
    data = body[start : body.index(b"]", start) + 1]
    parser = simdjson.Parser()

    def run() -> np.ndarray[Any, Any]:
        document = parser.parse(data)
        assert isinstance(document, simdjson.Array)
        values = np.frombuffer(document.as_buffer(of_type="d"), np.float64).astype(np.float32)
        del document  # frees the parser for the next call
        return values

    return run


def print_table(rows: list[Row], runs: int) -> bool:
    """Print the table; True when every goal is met by the worst run."""
    met_all = True
    print(
        f"{'operation':44} {'ours MB/s':>10} {'tritonclient':>12} {'memcpy':>7} "
        f"{'ratio':>7} {'worst':>7} {'cpu':>7} {'goal':>5}"
    )
    for row in rows:
        ours_mbps = row.nbytes / row.ours / 1e6
        theirs_mbps = row.nbytes / row.theirs / 1e6
        memcpy = f"{row.nbytes / row.memcpy / 1e6:7.0f}" if row.memcpy else f"{'':7}"
        verdict = ""
        if row.goal is not None:
            met = row.ratio_worst >= row.goal
            met_all = met_all and met
            verdict = "  met" if met else "  MISSED"
        goal = "" if row.goal is None else f"{row.goal:g}x"
        print(
            f"{row.name:44} {ours_mbps:10.0f} {theirs_mbps:12.1f} {memcpy} "
            f"{row.ratio_median:6.1f}x {row.ratio_worst:6.1f}x {row.ratio_cpu:6.1f}x {goal:>5}{verdict}"
        )
    print(
        f"ratio: tritonclient's time / ours, median of {runs} runs; worst: the lowest run (goals judge it); "
        "cpu: the same from CPU time"
    )
    return met_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.partition("\n")[0] if __doc__ else None,
        epilog=__doc__.partition("\n")[2] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--size-mb", type=float, default=64.0, help="binary tensor size (default 64)")
    parser.add_argument("--json-size-mb", type=float, default=8.0, help="larger JSON tensor size (default 8)")
    parser.add_argument(
        "--response-mb", type=float, default=1.0, help="JSON response of InvokeEndpoint size (default 1)"
    )
    parser.add_argument("--runs", type=int, default=7, help=f"runs per row, at least {MIN_RUNS} (default 7)")
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="time per run of a row, in rounds of calls (default 1)"
    )
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a goal is missed")
    args = parser.parse_args(argv)
    runs = max(MIN_RUNS, args.runs)
    rng = np.random.default_rng(0)
    big = rng.standard_normal(int(args.size_mb * 1e6) // 4).astype(np.float32)
    larger = rng.standard_normal(int(args.json_size_mb * 1e6) // 4).astype(np.float32)
    response = rng.standard_normal(int(args.response_mb * 1e6) // 4).astype(np.float32)

    saved = _json.use_orjson, _json.use_simdjson
    encoders = tuple(name for name, available in (("orjson", saved[0]), ("json", True)) if available)
    decoders = tuple(
        name
        for name, available in (("simdjson", saved[1]), ("orjson", saved[0]), ("json", True))
        if available
    )
    load = os.getloadavg()[0]
    started = time.monotonic()
    try:
        rows = binary_rows(big, runs, args.seconds)
        del big
        # The largest JSON body InvokeEndpoint carries (6 MB) holds about 1.2 MB of FP32 data.
        rows += json_rows(response, encoders[:1], decoders[:1], runs, args.seconds)
        rows += json_rows(larger, encoders, decoders, runs, args.seconds)
    finally:
        _json.use_orjson, _json.use_simdjson = saved
    met = print_table(rows, runs)
    print(
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
        f"({os.cpu_count()} CPUs); {time.monotonic() - started:.0f} s"
    )
    return 0 if met or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
