"""``invoke``: one inference on a TargetModel (or an inference component) of a live endpoint, its inputs from
files, its outputs shown."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mme_triton._inference_components import Hosting
from mme_triton.cli._common import SubParsers, add_command, aws_session, emit

__all__ = ["load_inputs", "register"]


def _add(inputs: dict[str, Any], name: str, value: Any, source: str) -> None:
    if name in inputs:
        raise ValueError(f"input {name!r} is given twice ({source})")
    inputs[name] = value


def load_inputs(named: list[str], files: list[Path]) -> dict[str, Any]:
    """``{name: array}`` from ``NAME=FILE.npy`` pairs and ``.npz`` / KServe v2 ``.json`` request files.

    A ``.json`` file is a KServe v2 request body, ``{"inputs": [{"name", "shape", "datatype", "data"}]}``,
    the one AWS's samples send; its datatypes are kept.

    Raises:
        ValueError: a pair without ``=``, an unknown file kind, a name given twice, no input at all.
        FileNotFoundError: a file that does not exist.
    """
    import numpy as np

    inputs: dict[str, Any] = {}
    for pair in named:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--input takes NAME=FILE.npy, got {pair!r}")
        if not path.endswith(".npy"):
            raise ValueError(f"--input {name}: {path!r} is not a .npy file (use --inputs for .npz and .json)")
        _add(inputs, name, np.load(path, allow_pickle=False), f"--input {pair}")
    for file in files:
        if file.suffix == ".npz":
            with np.load(file, allow_pickle=False) as archive:
                for name in archive.files:
                    _add(inputs, name, archive[name], str(file))
        elif file.suffix == ".json":
            from mme_triton.client.codec import decode_request

            arrays, _ = decode_request(file.read_bytes(), "application/json", copy=True)
            for name, array in arrays.items():
                _add(inputs, name, array, str(file))
        else:
            raise ValueError(f"--inputs {file}: give a .npz file or a KServe v2 .json request body")
    if not inputs:
        raise ValueError("no inputs: give --input NAME=FILE.npy or --inputs FILE.npz|FILE.json")
    return inputs


def _plain(array: Any) -> tuple[str, Any]:
    """``(datatype, JSON-ready data)`` of an output array."""
    import numpy as np

    from mme_triton.client.datatypes import triton_datatype

    datatype = triton_datatype(array.dtype)
    if datatype == "BYTES":
        flat = [v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else str(v) for v in array.flat]
        return datatype, np.array(flat, dtype=object).reshape(array.shape).tolist()
    if datatype == "BF16":
        return datatype, array.astype(np.float32).tolist()
    return datatype, array.tolist()


def _text(outputs: dict[str, Any]) -> str:
    import numpy as np

    lines = []
    for name, array in outputs.items():
        datatype, _ = _plain(array)
        body = np.array2string(array, threshold=200, edgeitems=3, separator=" ")
        lines.append(f"{name} {datatype} {list(array.shape)}\n{body}")
    return "\n".join(lines)


def _invoke(args: argparse.Namespace) -> int:
    import numpy as np

    from mme_triton.client.client import MMEClient

    inputs = load_inputs(args.input, args.inputs)
    limits = {args.target_model: args.max_batch_size} if args.max_batch_size is not None else None
    hosting: Hosting = "inference-components" if args.component else "mme"
    client = MMEClient(
        args.endpoint_name, boto3_session=aws_session(args), max_batch_size=limits, hosting=hosting
    )
    outputs = client.infer(
        args.target_model,
        inputs,
        args.output or None,
        binary=args.binary,
        binary_outputs=True if args.binary_outputs else None,
        split_batches=args.split_batches,
        custom_attributes=args.custom_attributes,
    )
    target = None
    if args.save is not None:
        # numpy.savez adds .npz to a name without it: say the name of the file it writes
        target = args.save if args.save.suffix == ".npz" else args.save.with_name(f"{args.save.name}.npz")
        np.savez(target, **outputs)
    data = {
        name: {"datatype": _plain(array)[0], "shape": list(array.shape), "data": _plain(array)[1]}
        for name, array in outputs.items()
    }
    saved = f"saved {', '.join(outputs)} to {target}" if target is not None else None
    emit(args, saved or (lambda: _text(outputs)), {"outputs": data, "saved": str(target) if target else None})
    return 0


def register(sub: SubParsers) -> None:
    """Add ``invoke``."""
    p = add_command(
        sub,
        "invoke",
        help="run one inference on a TargetModel or inference component (InvokeEndpoint) and print or save "
        "the outputs",
        examples=[
            "mme-triton invoke my-endpoint linear.tar.gz --input INPUT0=x.npy",
            "mme-triton invoke my-components linear --component --input INPUT0=x.npy",
            "mme-triton invoke my-endpoint linear.tar.gz --inputs request.json --json-data",
            "mme-triton invoke my-endpoint linear.tar.gz --inputs batch.npz --save out.npz \\",
            "    --split-batches --max-batch-size 8",
        ],
        handler=_invoke,
        aws=True,
    )
    p.add_argument("endpoint_name", metavar="ENDPOINT")
    p.add_argument(
        "target_model", metavar="TARGET", help="a TargetModel, e.g. linear.tar.gz (with --component: a name)"
    )
    p.add_argument(
        "--component",
        action="store_true",
        help="TARGET names an inference component of the endpoint (sent as InferenceComponentName)",
    )
    p.add_argument("-i", "--input", action="append", default=[], metavar="NAME=FILE.npy", help="one input")
    p.add_argument(
        "--inputs",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="inputs from a .npz file (names as keys) or a KServe v2 .json request body",
    )
    p.add_argument("-o", "--output", action="append", default=[], metavar="NAME", help="outputs to return")
    wire = p.add_mutually_exclusive_group()
    wire.add_argument(
        "--binary", dest="binary", action="store_true", default=True, help="binary tensors (default)"
    )
    wire.add_argument(
        "--json-data", dest="binary", action="store_false", help="tensors as JSON data (KServe v2 JSON)"
    )
    p.add_argument("--binary-outputs", action="store_true", help="ask for the outputs in binary either way")
    p.add_argument("--split-batches", action="store_true", help="split a request over 6 MiB along dim 0")
    p.add_argument(
        "--max-batch-size",
        type=int,
        default=None,
        help="with --split-batches, at most this many rows a request",
    )
    p.add_argument("--custom-attributes", help="InvokeEndpoint's CustomAttributes header")
    p.add_argument(
        "--save",
        type=Path,
        metavar="FILE.npz",
        help="save the outputs to a .npz file (.npz is added if missing)",
    )
