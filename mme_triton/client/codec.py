"""KServe v2 / Triton inference bodies: JSON and Triton's binary-tensor extension, both directions.

Pure functions, no AWS. A binary body is a JSON header followed by the tensors' bytes in header order;
its length travels in the Content-Type, the way SageMaker's Triton front-end expects::

    application/vnd.sagemaker-triton.binary+json;json-header-size=<header bytes>

A body with no binary tensor is plain ``application/json``.

>>> body, content_type = encode_request({"x": np.ones((1, 4), np.float32)})
>>> content_type
'application/vnd.sagemaker-triton.binary+json;json-header-size=135'
>>> answer, answer_type = encode_response({"y": np.arange(3, dtype=np.int64)})  # what Triton sends back
>>> decode_response(answer, answer_type)
{'y': array([0, 1, 2])}

Decoded numeric tensors of a binary body are read-only views onto the body: no tensor bytes are copied,
and the body stays alive as long as one of the arrays does. ``copy=True`` gives writable copies.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from mme_triton.client import _header_memo, _json, _memory
from mme_triton.client._tensors import (
    NUMERIC_DATATYPES,
    EncodedTensor,
    decode_binary,
    decode_json_data,
    encode_tensor,
    write_tensor,
)
from mme_triton.client._tritonclient import (
    is_tritonclient_input,
    is_tritonclient_output,
    tritonclient_output,
    tritonclient_tensor,
)
from mme_triton.client.datatypes import NUMPY_DTYPE, triton_datatype
from mme_triton.errors import CodecError

__all__ = [
    "BINARY_CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "InferInput",
    "InferRequestedOutput",
    "InferResponse",
    "decode_request",
    "decode_response",
    "decode_response_full",
    "encode_request",
    "encode_response",
]

BINARY_CONTENT_TYPE = "application/vnd.sagemaker-triton.binary+json"
JSON_CONTENT_TYPE = "application/json"
_HEADER_SIZE = "json-header-size"
# Managed by ``binary`` / ``binary_outputs``; a caller's own value would contradict them.
_MANAGED_PARAMETERS = frozenset({"binary_data_output"})

Body = bytes | bytearray | memoryview


class InferInput:
    """One input tensor, as in tritonclient: ``InferInput(name, shape, datatype)``.

    Example:
        >>> x = InferInput("x", [1, 4], "FP32").set_data_from_numpy(np.ones((1, 4), np.float32))
        >>> encode_request([x])[1]
        'application/vnd.sagemaker-triton.binary+json;json-header-size=135'
    """

    def __init__(self, name: str, shape: Sequence[int], datatype: str) -> None:
        if datatype not in NUMPY_DTYPE:
            raise ValueError(f"unknown Triton datatype {datatype!r} for input {name!r}")
        self._name = name
        self._shape = [int(d) for d in shape]
        self._datatype = datatype
        self._data: np.ndarray[Any, Any] | None = None
        self._binary = True

    def name(self) -> str:
        """The input's name."""
        return self._name

    def shape(self) -> list[int]:
        """The input's shape."""
        return list(self._shape)

    def datatype(self) -> str:
        """The input's Triton datatype."""
        return self._datatype

    def set_shape(self, shape: Sequence[int]) -> InferInput:
        """Change the shape (data set later must match it)."""
        self._shape = [int(d) for d in shape]
        return self

    def set_data_from_numpy(self, input_tensor: np.ndarray[Any, Any], binary_data: bool = True) -> InferInput:
        """Attach the tensor's data.

        Args:
            input_tensor: an array whose dtype maps to this input's datatype and whose shape is exactly
                this input's shape (never reshaped).
            binary_data: send it in the binary section (default) or as JSON ``data``. Tensors JSON
                cannot carry (FP16, BF16, non-UTF-8 BYTES) go binary either way.

        Raises:
            TypeError: not a numpy array.
            ValueError: the dtype or the shape does not match.
        """
        if not isinstance(input_tensor, np.ndarray):
            raise TypeError(
                f"input {self._name!r}: expected a numpy array, got {type(input_tensor).__name__}"
            )
        datatype = triton_datatype(input_tensor.dtype)
        if datatype != self._datatype:
            raise ValueError(
                f"input {self._name!r} is {self._datatype} but the array's dtype {input_tensor.dtype} "
                f"is {datatype}"
            )
        if list(input_tensor.shape) != self._shape:
            raise ValueError(
                f"input {self._name!r} has shape {self._shape} but the array's shape is "
                f"{list(input_tensor.shape)}"
            )
        self._data = input_tensor
        self._binary = bool(binary_data)
        return self

    def data(self) -> np.ndarray[Any, Any]:
        """The array set by :meth:`set_data_from_numpy`.

        Raises:
            ValueError: no data was set.
        """
        if self._data is None:
            raise ValueError(f"input {self._name!r} has no data; call set_data_from_numpy() first")
        return self._data

    def binary_data(self) -> bool:
        """Whether the data goes in the binary section."""
        return self._binary

    def __repr__(self) -> str:
        return f"InferInput({self._name!r}, {self._shape!r}, {self._datatype!r})"


class InferRequestedOutput:
    """One requested output, as in tritonclient: ``InferRequestedOutput(name, binary_data, class_count)``.

    ``class_count`` > 0 asks Triton for the top classes instead of the tensor (a BYTES output of
    ``"score:index[:label]"`` strings).
    """

    def __init__(self, name: str, binary_data: bool = True, class_count: int = 0) -> None:
        if class_count < 0:
            raise ValueError(f"class_count must be >= 0, got {class_count}")
        self._name = name
        self._binary = bool(binary_data)
        self._class_count = int(class_count)

    def name(self) -> str:
        """The output's name."""
        return self._name

    def binary_data(self) -> bool:
        """Whether the output is asked for in binary."""
        return self._binary

    def class_count(self) -> int:
        """The number of top classes asked for (0: the tensor itself)."""
        return self._class_count

    def __repr__(self) -> str:
        return (
            f"InferRequestedOutput({self._name!r}, binary_data={self._binary}, "
            f"class_count={self._class_count})"
        )


@dataclass(frozen=True)
class InferResponse:
    """A decoded response: the outputs and the header's other fields."""

    outputs: dict[str, np.ndarray[Any, Any]]
    model_name: str | None = None
    model_version: str | None = None
    id: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)


# --- encoding -----------------------------------------------------------------------------------------


def _input_tensors(inputs: Mapping[str, Any] | Sequence[InferInput], binary: bool) -> list[EncodedTensor]:
    tensors: list[EncodedTensor] = []
    seen: set[str] = set()
    items: list[tuple[str, np.ndarray[Any, Any], str, bool] | EncodedTensor] = []
    if isinstance(inputs, Mapping):
        for name, value in inputs.items():
            if not isinstance(name, str):
                raise TypeError(f"input names must be str, got {name!r}")
            array = np.asarray(value)
            items.append((name, array, triton_datatype(array.dtype), not binary))
    else:
        candidate: object = inputs
        if isinstance(candidate, (str, bytes)) or not isinstance(candidate, Sequence):
            raise TypeError(
                "inputs must be a mapping of name to array or a sequence of InferInput, "
                f"got {type(candidate).__name__}"
            )
        for item in candidate:
            if isinstance(item, InferInput):
                items.append((item.name(), item.data(), item.datatype(), not item.binary_data()))
            elif is_tritonclient_input(item):
                items.append(tritonclient_tensor(item))  # its wire bytes as they are
            else:
                kind = f"{type(item).__module__}.{type(item).__qualname__}"
                raise TypeError(f"inputs must be tritonclient or mme_triton.InferInput objects, got {kind}")
    for item in items:
        if isinstance(item, EncodedTensor):
            tensor = item
        else:
            name, array, datatype, want_json = item
            tensor = encode_tensor(name, array, datatype, want_json=want_json)
        if tensor.name in seen:
            raise ValueError(f"input {tensor.name!r} is given twice")
        seen.add(tensor.name)
        tensors.append(tensor)
    return tensors


def _check_parameters(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    checked: dict[str, Any] = {}
    for key, value in (parameters or {}).items():
        if not isinstance(key, str):
            raise TypeError(f"parameter names must be str, got {key!r}")
        if key in _MANAGED_PARAMETERS:
            raise ValueError(f"parameter {key!r} is set by binary/binary_outputs; do not pass it")
        if not isinstance(value, (str, bool, int, float)):
            raise TypeError(
                f"parameter {key!r}: values must be str, bool, int or float, got {type(value).__name__}"
            )
        checked[key] = value
    return checked


def _requested_outputs(
    outputs: Sequence[str | InferRequestedOutput] | None,
    binary: bool,
    binary_outputs: bool | Collection[str] | None,
    parameters: dict[str, Any],
) -> list[dict[str, Any]] | None:
    forced: Collection[str] = ()
    if isinstance(binary_outputs, bool):
        default_binary = binary_outputs
    else:
        default_binary = binary
        if binary_outputs is not None:
            if isinstance(binary_outputs, str):
                raise TypeError("binary_outputs must be a bool or a collection of output names, not a str")
            forced = frozenset(binary_outputs)
    if outputs is not None and not isinstance(outputs, str) and len(outputs) == 0:
        outputs = None  # as in tritonclient: no outputs named means all of them
    if outputs is None:
        if forced:
            raise ValueError(
                "binary_outputs names outputs, but outputs=None asks for all of them with one setting; "
                "list the outputs, or pass binary_outputs=True"
            )
        if default_binary:
            parameters["binary_data_output"] = True
        return None
    if isinstance(outputs, str):
        raise TypeError("outputs must be a sequence of names or InferRequestedOutput, not a str")
    requested: list[dict[str, Any]] = []
    seen: set[str] = set()
    for output in cast("Sequence[object]", outputs):
        if isinstance(output, InferRequestedOutput):
            name, use_binary, class_count = output.name(), output.binary_data(), output.class_count()
            if isinstance(binary_outputs, bool):
                use_binary = binary_outputs
        elif isinstance(output, str):
            name, use_binary, class_count = output, default_binary, 0
        elif is_tritonclient_output(output):
            name, own_binary, class_count = tritonclient_output(output)
            use_binary = default_binary if own_binary is None else own_binary
            if isinstance(binary_outputs, bool):
                use_binary = binary_outputs
        else:
            raise TypeError(f"outputs must be names or InferRequestedOutput, got {type(output).__name__}")
        if name in seen:
            raise ValueError(f"output {name!r} is requested twice")
        seen.add(name)
        output_parameters: dict[str, Any] = {}
        if class_count:
            output_parameters["classification"] = class_count
        output_parameters["binary_data"] = use_binary or name in forced
        requested.append({"name": name, "parameters": output_parameters})
    return requested


def _tensor_header(tensor: EncodedTensor) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": tensor.name, "shape": tensor.shape, "datatype": tensor.datatype}
    if tensor.binary:
        entry["parameters"] = {"binary_data_size": tensor.nbytes}
    else:
        entry["data"] = tensor.json_data
    return entry


def _assemble(header: dict[str, Any], tensors: Sequence[EncodedTensor]) -> tuple[bytes | bytearray, str]:
    """The body: the JSON header, then the binary tensors in header order, each copied exactly once.

    A small body of tensors that need no conversion is ``bytes`` built in one pass. A large one (from
    :data:`_memory.LARGE` bytes), or one with a tensor to convert (byte order, strides, dtype), is a
    ``bytearray`` that each tensor is copied or converted straight into; a large one sits on huge pages
    where the system offers them (see :mod:`mme_triton.client._memory`).
    """
    try:
        header_bytes = _json.dumps(header)
    except (TypeError, ValueError) as exc:
        raise CodecError(f"cannot write the JSON header: {exc}") from exc
    binaries = [t for t in tensors if t.binary]
    if not binaries:
        return header_bytes, JSON_CONTENT_TYPE
    content_type = f"{BINARY_CONTENT_TYPE};{_HEADER_SIZE}={len(header_bytes)}"
    size = len(header_bytes) + sum(t.nbytes for t in binaries)
    if size < _memory.LARGE and all(t.source is None for t in binaries):
        return b"".join([header_bytes, *(t.buffer for t in binaries)]), content_type
    body = _memory.new_buffer(size)  # uninitialised when large: every byte is written below
    body[: len(header_bytes)] = header_bytes
    offset = len(header_bytes)
    for tensor in binaries:
        write_tensor(body, offset, tensor)
        offset += tensor.nbytes
    return body, content_type


def encode_request(
    inputs: Mapping[str, Any] | Sequence[InferInput],
    outputs: Sequence[str | InferRequestedOutput] | None = None,
    *,
    binary: bool = True,
    parameters: Mapping[str, Any] | None = None,
    request_id: str | None = None,
    binary_outputs: bool | Collection[str] | None = None,
) -> tuple[bytes | bytearray, str]:
    """Encode an inference request body.

    Args:
        inputs: ``{name: array}`` (each array's dtype gives the datatype: ``float32`` is FP32, ``bool``
            is BOOL, ``object``/``S``/``U`` arrays are BYTES, ``ml_dtypes.bfloat16`` is BF16; lists go
            through ``numpy.asarray``), or a sequence of :class:`InferInput` (or of tritonclient's own
            ``tritonclient.http.InferInput`` / ``tritonclient.grpc.InferInput``, whose wire bytes are sent
            as they are). Shapes are sent exactly as they are.
        outputs: ``None`` for every output of the model, or the names (or :class:`InferRequestedOutput`,
            tritonclient's included) of the outputs to return.
        binary: send the inputs in the binary section (default) or as JSON ``data``, and ask for the
            outputs the same way. ``InferInput`` / ``InferRequestedOutput`` objects keep their own
            ``binary_data`` setting. Tensors JSON cannot carry (FP16, BF16, BYTES that are not UTF-8)
            are sent in binary whatever ``binary`` says.
        parameters: request parameters (``str``/``bool``/``int``/``float`` values), e.g. ``priority``.
        request_id: the request's ``id``, echoed by the server.
        binary_outputs: ``True``/``False`` asks for every output in binary/JSON whatever ``binary``
            says; a collection of names asks for those outputs in binary (needs ``outputs``). Triton
            refuses to write FP16 and BF16 outputs as JSON, so a JSON request (``binary=False``) for a
            model with such outputs needs ``binary_outputs``.

    Returns:
        ``(body, content_type)``: ``bytes``, or a ``bytearray`` when the body is 4 MiB or more or an
        input had to be converted while copying (boto3 sends both); and ``application/json`` or
        ``application/vnd.sagemaker-triton.binary+json;json-header-size=N``.

    Raises:
        TypeError: an input's dtype has no Triton datatype, a BYTES element is neither bytes nor str,
            or an argument has the wrong type.
        ValueError: a name is given twice, an ``InferInput`` has no data, or a parameter is reserved.

    NaN and infinities in a JSON float tensor are written as ``NaN``, ``Infinity`` and ``-Infinity``,
    which Triton's JSON parser reads.

    Example:
        >>> body, content_type = encode_request({"x": np.zeros((2, 3), np.float32)}, ["y"])
    """
    form = None
    plain = outputs is None and binary is True and not parameters and request_id is None
    if plain and binary_outputs is None and type(inputs) is dict:
        form = _header_memo.request_form(inputs)
        joined = None if form is None else _header_memo.join_request(form, inputs)
        if joined is not None:  # inputs of a form encoded before: its header, then their bytes
            return joined
    request_parameters = _check_parameters(parameters)
    tensors = _input_tensors(inputs, binary)
    requested = _requested_outputs(outputs, binary, binary_outputs, request_parameters)
    header: dict[str, Any] = {}
    if request_id is not None:
        header["id"] = str(request_id)
    header["inputs"] = [_tensor_header(t) for t in tensors]
    if requested is not None:
        header["outputs"] = requested
    if request_parameters:
        header["parameters"] = request_parameters
    body, content_type = _assemble(header, tensors)
    if form is not None:
        _header_memo.remember_request(form, body, content_type)
    return body, content_type


def encode_response(
    outputs: Mapping[str, Any],
    *,
    binary: bool | Collection[str] = True,
    model_name: str = "",
    model_version: str = "",
    request_id: str | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> tuple[bytes | bytearray, str]:
    """Encode an inference response body the way Triton writes one.

    Args:
        outputs: ``{name: array}``.
        binary: ``True``/``False`` for every output, or the names of the outputs to write in binary.
            FP16, BF16 and non-UTF-8 BYTES outputs are written in binary either way.
        model_name, model_version, request_id, parameters: the header's other fields.

    Returns:
        ``(body, content_type)`` as for :func:`encode_request`.

    Example:
        >>> body, content_type = encode_response({"y": np.arange(3, dtype=np.int64)}, model_name="m")
    """
    if isinstance(binary, str):
        raise TypeError("binary must be a bool or a collection of output names, not a str")
    tensors: list[EncodedTensor] = []
    for name, value in outputs.items():
        array = np.asarray(value)
        use_binary = binary if isinstance(binary, bool) else name in binary
        tensors.append(encode_tensor(name, array, triton_datatype(array.dtype), want_json=not use_binary))
    header: dict[str, Any] = {"model_name": model_name, "model_version": model_version}
    if request_id is not None:
        header["id"] = str(request_id)
    if parameters:
        header["parameters"] = dict(parameters)
    header["outputs"] = [_tensor_header(t) for t in tensors]
    return _assemble(header, tensors)


# --- decoding -----------------------------------------------------------------------------------------


def _header_size(content_type: str | None, body_size: int, header_size: int | None) -> int:
    """The JSON header's length: from ``json-header-size=N`` in the Content-Type, else the whole body."""
    size_text: str | None = None
    if content_type:
        media_type, *params = content_type.split(";")
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == _HEADER_SIZE:
                size_text = value.strip().strip('"')
        if size_text is None and media_type.strip().lower() == BINARY_CONTENT_TYPE:
            raise CodecError(f"Content-Type {content_type!r} has no {_HEADER_SIZE} parameter")
    if header_size is None and size_text is None:
        return body_size
    if header_size is None:
        try:
            header_size = int(size_text or "")
        except ValueError:
            raise CodecError(f"{_HEADER_SIZE} in {content_type!r} is not a number") from None
    if header_size < 0 or header_size > body_size:
        raise CodecError(f"the JSON header size {header_size} is outside the body of {body_size} bytes")
    return header_size


def _split(
    body: Body, content_type: str | None, header_size: int | None, *, lazy_data: bool = False
) -> tuple[dict[str, Any], memoryview]:
    """The parsed JSON header and the binary section.

    ``lazy_data`` leaves numeric tensors' JSON ``data`` to the decoder (``_json.loads_tensors``);
    otherwise the header is plain Python objects throughout.
    """
    view = memoryview(body)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    size = _header_size(content_type, len(view), header_size)
    try:
        if not lazy_data:
            header = _json.loads(view[:size])
        elif isinstance(body, bytes) and size == len(body):
            header = _json.loads_tensors(body, NUMERIC_DATATYPES)  # a whole-JSON body, not copied
        else:
            header = _json.loads_tensors(view[:size], NUMERIC_DATATYPES)
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"the body's JSON header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise CodecError(f"the body's JSON header is a {type(header).__name__}, not an object")
    return header, view[size:]


def _decode_tensors(
    entries: Any, section: memoryview, *, copy: bool, what: str
) -> dict[str, np.ndarray[Any, Any]]:
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise CodecError(f"'{what}' in the header is not a list")
    tensors: dict[str, np.ndarray[Any, Any]] = {}
    offset = 0
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise CodecError(f"an entry of '{what}' has no name")
        name: str = entry["name"]
        if name in tensors:
            raise CodecError(f"'{what}' names this tensor twice", tensor=name)
        datatype = entry.get("datatype")
        if not isinstance(datatype, str) or datatype not in NUMPY_DTYPE:
            raise CodecError(f"unknown datatype {datatype!r}", tensor=name)
        shape = entry.get("shape")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise CodecError(f"shape {shape!r} is not a list of non-negative integers", tensor=name)
        parameters = entry.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise CodecError("'parameters' is not an object", tensor=name)
        size = parameters.get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise CodecError(f"binary_data_size {size!r} is not a non-negative integer", tensor=name)
            if offset + size > len(section):
                raise CodecError(
                    f"the binary section is truncated: the tensor needs bytes {offset}..{offset + size} "
                    f"but only {len(section)} follow the JSON header",
                    tensor=name,
                )
            tensors[name] = decode_binary(name, datatype, shape, section[offset : offset + size], copy=copy)
            offset += size
        elif "data" in entry:
            tensors[name] = decode_json_data(name, datatype, shape, entry["data"])
        elif "shared_memory_region" in parameters:
            raise CodecError(
                "the tensor is in a shared-memory region, which this codec does not read", tensor=name
            )
        else:
            raise CodecError("the tensor has neither 'data' nor a binary_data_size", tensor=name)
    if offset != len(section):
        raise CodecError(
            f"{len(section) - offset} bytes follow the last binary tensor; the header accounts for {offset}"
        )
    return tensors


def decode_response_full(
    body: Body, content_type: str | None, *, copy: bool = False, header_size: int | None = None
) -> InferResponse:
    """Decode a response body into its outputs and its header fields.

    Same arguments and errors as :func:`decode_response`.

    Example:
        >>> body, content_type = encode_response({"y": np.arange(3, dtype=np.int64)}, model_name="m")
        >>> response = decode_response_full(body, content_type)
        >>> response.model_name, response.outputs["y"]
        ('m', array([0, 1, 2]))
    """
    header, section = _split(body, content_type, header_size, lazy_data=True)
    if "outputs" not in header and "error" in header:
        raise CodecError(f"the server answered with an error: {header['error']}")
    outputs = _decode_tensors(header.get("outputs"), section, copy=copy, what="outputs")
    parameters = header.get("parameters")
    model_version = header.get("model_version")
    request_id = header.get("id")
    return InferResponse(
        outputs=outputs,
        model_name=header.get("model_name") if isinstance(header.get("model_name"), str) else None,
        model_version=None if model_version is None else str(model_version),
        id=None if request_id is None else str(request_id),
        parameters=parameters if isinstance(parameters, dict) else {},
    )


def decode_response(
    body: Body, content_type: str | None, *, copy: bool = False, header_size: int | None = None
) -> dict[str, np.ndarray[Any, Any]]:
    """Decode an inference response body into ``{output name: array}``.

    Numeric outputs from the binary section are read-only views onto ``body`` (no tensor data is
    copied; the arrays keep ``body`` alive). ``copy=True`` returns writable arrays that own their
    memory. JSON outputs and BYTES outputs (object arrays of ``bytes``) are always new arrays.

    Args:
        body: the response body.
        content_type: its Content-Type; ``json-header-size=N`` marks a binary body (parameters are
            read case-insensitively, spaces allowed). Without it the whole body is JSON.
        copy: return writable copies instead of views.
        header_size: the JSON header's length when it comes from elsewhere (Triton's own HTTP
            front-end sends it as ``Inference-Header-Content-Length``).

    Raises:
        CodecError: the body is not a valid response (not JSON, truncated, sizes that do not match
            shape × datatype, unknown datatype ...), naming the tensor; or it is the server's error
            body ``{"error": "..."}``, whose message it carries.

    Example:
        >>> body, content_type = encode_response({"y": np.arange(3, dtype=np.int64)})
        >>> decode_response(body, content_type)["y"]
        array([0, 1, 2])
        >>> # from InvokeEndpoint: decode_response(answer["Body"].read(), answer["ContentType"])
    """
    known = type(body) is bytes and header_size is None and isinstance(content_type, str)
    if known:
        # an answer whose header was read before: its outputs are cut from the body where they were
        outputs = _header_memo.cut_answer(cast(bytes, body), cast(str, content_type), copy)
        if outputs is not None:
            return outputs
    outputs = decode_response_full(body, content_type, copy=copy, header_size=header_size).outputs
    if known:
        _header_memo.remember_answer(cast(bytes, body), cast(str, content_type))
    return outputs


def decode_request(
    body: Body, content_type: str | None, *, copy: bool = False, header_size: int | None = None
) -> tuple[dict[str, np.ndarray[Any, Any]], dict[str, Any]]:
    """Decode an inference request body into ``({input name: array}, header)``.

    The header is the parsed JSON header (``id``, ``outputs``, ``parameters`` ...). Arrays follow the
    same rules as :func:`decode_response`.

    Raises:
        CodecError: the body is not a valid request.

    Example:
        >>> body, content_type = encode_request({"x": np.ones((1, 4), np.float32)})
        >>> inputs, header = decode_request(body, content_type)
        >>> inputs["x"].shape, header["inputs"][0]["datatype"]
        ((1, 4), 'FP32')
    """
    header, section = _split(body, content_type, header_size)
    inputs = _decode_tensors(header.get("inputs"), section, copy=copy, what="inputs")
    return inputs, header
