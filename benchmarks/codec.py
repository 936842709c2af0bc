"""Codec throughput: mme_triton's encoder/decoder against tritonclient's and a plain numpy memcpy.

Run: ``python benchmarks/codec.py`` (options: ``--size-mb``, ``--json-size-mb``, ``--response-mb``,
``--repeat``).

JSON rows name the backend: ``simdjson`` decodes with pysimdjson (numeric data to numpy in C),
``orjson`` with orjson, ``json`` with the standard library alone (encoding: orjson or ``json``).
orjson and pysimdjson are dependencies of the package, so the goals apply to the rows that use them;
the ``fallback`` rows show what a platform without their wheels gets. The JSON response is written the
way Triton writes one (FP32 values as float64 text, flat ``data``).

JSON sizes: InvokeEndpoint carries at most 6 MB each way, so the largest FP32 tensor that ever travels
as JSON is about 1 MB (``--response-mb``, a 5 MB response). The larger JSON row (``--json-size-mb``,
default 8 MB of FP32, a 39 MB body) shows that speed holds beyond that; ``--json-size-mb 100`` runs
the 100 MB tensor of the binary rows as JSON too (a 490 MB body; tritonclient needs 10-20 s per
direction and GBs of memory for it).

Every encode row produces the body a caller sends (bytes ready for ``invoke_endpoint``); every decode
row ends with numpy arrays. MB/s are megabytes (10**6) of tensor data per second, best of the repeats.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tritonclient.http as httpclient

from mme_triton.client import _json
from mme_triton.client.codec import decode_response, encode_request, encode_response

Client = httpclient.InferenceServerClient


def best_seconds(run: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
        del result
    return best


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


def header_size(content_type: str) -> int | None:
    return int(content_type.rpartition("=")[2]) if "json-header-size" in content_type else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size-mb", type=float, default=100.0, help="binary tensor size (default 100)")
    parser.add_argument("--json-size-mb", type=float, default=8.0, help="JSON tensor size (default 8)")
    parser.add_argument(
        "--response-mb", type=float, default=1.0, help="JSON response of InvokeEndpoint size (default 1)"
    )
    parser.add_argument("--repeat", type=int, default=7, help="runs per measurement, best kept (default 7)")
    args = parser.parse_args(argv)
    repeat = max(1, args.repeat)
    json_repeat = max(1, min(repeat, 3))
    rng = np.random.default_rng(0)
    big = rng.standard_normal(int(args.size_mb * 1e6) // 4).astype(np.float32)
    small = rng.standard_normal(int(args.json_size_mb * 1e6) // 4).astype(np.float32)
    response = rng.standard_normal(int(args.response_mb * 1e6) // 4).astype(np.float32)

    rows: list[tuple[str, float, float | None, float | None, float | None]] = []

    def row(
        name: str, nbytes: int, ours: float, theirs: float | None, memcpy: float | None, goal: float | None
    ) -> None:
        mbps = [None if s is None else nbytes / s / 1e6 for s in (ours, theirs, memcpy)]
        rows.append((name, mbps[0] or 0.0, mbps[1], mbps[2], goal))

    memcpy = best_seconds(lambda: big.copy(), repeat)

    # Binary encode: the body as sent.
    ours = best_seconds(lambda: encode_request({"x": big}), repeat)
    theirs = best_seconds(lambda: tc_encode(big, True), repeat)
    row(f"binary encode ({big.nbytes / 1e6:.0f} MB)", big.nbytes, ours, theirs, memcpy, 1.8)

    # Binary decode: a response body to arrays (views for the codec, copy=True also shown).
    encoded, content_type = encode_response({"y": big})
    body = bytes(encoded)
    del encoded
    size = header_size(content_type)
    ours = best_seconds(lambda: decode_response(body, content_type), repeat)
    theirs = best_seconds(lambda: tc_decode(body, size), repeat)
    row(f"binary decode ({big.nbytes / 1e6:.0f} MB)", big.nbytes, ours, theirs, memcpy, 20.0)
    ours_copy = best_seconds(lambda: decode_response(body, content_type, copy=True), repeat)
    row("binary decode, copy=True", big.nbytes, ours_copy, theirs, memcpy, None)
    body = b""  # frees the 100 MB body before the JSON rows

    saved = _json.use_orjson, _json.use_simdjson

    def json_row(
        what: str, array: np.ndarray[Any, Any], backend: str, primary: bool, ours: float, theirs: float
    ) -> None:
        label = f"JSON {what} ({array.nbytes / 1e6:g} MB, {backend}{'' if primary else ', fallback'})"
        row(label, array.nbytes, ours, theirs, None, 10.0 if primary else None)

    def encode_rows(array: np.ndarray[Any, Any], backends: tuple[str, ...]) -> None:
        theirs = best_seconds(lambda: tc_encode(array, False), json_repeat)
        for backend in backends:
            _json.use_orjson = backend == "orjson"
            ours = best_seconds(lambda: encode_request({"x": array}, binary=False), json_repeat)
            json_row("encode", array, backend, backend == encoders[0], ours, theirs)

    def decode_rows(array: np.ndarray[Any, Any], backends: tuple[str, ...]) -> None:
        body, content_type = triton_json_response(array)
        check_decoded(tc_decode(body, None), array, "tritonclient")
        theirs = best_seconds(lambda: tc_decode(body, None), json_repeat)
        for backend in backends:
            _json.use_simdjson = backend == "simdjson"
            _json.use_orjson = backend in ("simdjson", "orjson")
            check_decoded(decode_response(body, content_type)["y"], array, backend)
            ours = best_seconds(lambda: decode_response(body, content_type), json_repeat)
            json_row("decode", array, backend, backend == decoders[0], ours, theirs)

    encoders = tuple(name for name, available in (("orjson", saved[0]), ("json", True)) if available)
    decoders = tuple(
        name
        for name, available in (("simdjson", saved[1]), ("orjson", saved[0]), ("json", True))
        if available
    )
    try:
        # The largest JSON body InvokeEndpoint carries (6 MB) holds about 1.2 MB of FP32 data.
        encode_rows(response, encoders[:1])
        decode_rows(response, decoders[:1])
        encode_rows(small, encoders)
        decode_rows(small, decoders)
    finally:
        _json.use_orjson, _json.use_simdjson = saved

    print(f"{'operation':46} {'ours MB/s':>11} {'tritonclient':>13} {'memcpy':>9} {'ours/tc':>9} {'goal':>6}")
    for name, ours_mbps, tc_mbps, memcpy_mbps, goal in rows:
        ratio = ours_mbps / tc_mbps if tc_mbps else None
        print(
            f"{name:46} {ours_mbps:11.0f} {tc_mbps or 0:13.0f} "
            f"{memcpy_mbps if memcpy_mbps is not None else float('nan'):9.0f} "
            f"{ratio if ratio is not None else float('nan'):8.1f}x "
            f"{'' if goal is None else f'{goal:g}x':>6}"
            f"{'' if goal is None or ratio is None else ('  met' if ratio >= goal else '  MISSED')}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
