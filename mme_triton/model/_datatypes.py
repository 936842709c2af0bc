"""Config datatypes (``TYPE_FP32``, ``TYPE_STRING``) and request datatypes (``FP32``, ``BYTES``)."""

from __future__ import annotations

__all__ = ["config_datatype", "kserve_datatype"]


def config_datatype(datatype: str) -> str:
    """The config.pbtxt datatype: ``FP32`` -> ``TYPE_FP32``, ``BYTES`` -> ``TYPE_STRING``.

    Config names (``TYPE_FP32``, ``TYPE_STRING``) are accepted as they are.

    Raises:
        ValueError: not a Triton datatype.

    Example:
        >>> config_datatype("BYTES")
        'TYPE_STRING'
    """
    from mme_triton.model._pb import model_config_pb2

    name = datatype.upper()
    if not name.startswith("TYPE_"):
        name = "TYPE_STRING" if name == "BYTES" else f"TYPE_{name}"
    known = set(model_config_pb2().DataType.keys()) - {"TYPE_INVALID"}
    if name not in known:
        raise ValueError(f"unknown datatype {datatype!r}; use a Triton datatype such as FP32, INT64 or BYTES")
    return name


def kserve_datatype(config_name: str) -> str:
    """The request datatype of a config datatype: ``TYPE_FP32`` -> ``FP32``, ``TYPE_STRING`` -> ``BYTES``.

    Example:
        >>> kserve_datatype("TYPE_STRING")
        'BYTES'
    """
    name = config_name.removeprefix("TYPE_")
    return "BYTES" if name == "STRING" else name
