"""Read and write ``config.pbtxt`` with Triton's own ``inference.ModelConfig`` schema.

Parsing never raises for bad content: a syntax error, an unknown field (``max_batch_sise``) or a wrong
enum name (``TYPE_FLOAT32``) becomes a :class:`~mme_triton.model.problems.Problem` carrying the line and
column, and for near misses the name that was probably meant.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path

from mme_triton.model import codes
from mme_triton.model._files import read_regular
from mme_triton.model._pb import ModelConfig, model_config_pb2, new_model_config, text_format
from mme_triton.model.problems import Problem

__all__ = [
    "CONFIG_FILENAME",
    "ModelConfig",
    "datatype_name",
    "format_config",
    "parse_config",
    "parse_config_file",
]

CONFIG_FILENAME = "config.pbtxt"

_UNKNOWN_FIELD = re.compile(r'has no field named "(?P<field>[^"]+)"')
_UNKNOWN_ENUM = re.compile(r'Enum type "(?P<enum>[^"]+)" has no value named (?P<value>\S+?)\.?$')
_MESSAGE_TYPE = re.compile(r'Message type "(?P<message>[^"]+)"')
_VALUE_ERRORS = (
    "Couldn't parse",
    "Value out of range",
    "Invalid value",
    "Expected integer",
    "Expected double",
)
# protobuf prefixes its message with "line:column : "; the Problem carries those separately.
_POSITION_PREFIX = re.compile(r"^\d+:\d+ : ")


def parse_config(text: str, path: str | Path = CONFIG_FILENAME) -> tuple[ModelConfig | None, list[Problem]]:
    """Parse config.pbtxt text into an ``inference.ModelConfig`` message.

    Parameters:
        text: the file's content.
        path: reported as the problem's path.

    Returns:
        ``(config, problems)``: the message and no problems, or ``None`` and one problem saying where the
        text fails to parse.

    Example:
        >>> config, problems = parse_config('name: "m" max_batch_sise: 8')
        >>> problems[0].code, problems[0].line, problems[0].column
        ('config-unknown-field', 1, 11)
    """
    where = str(path)
    config = new_model_config()
    tf = text_format()
    try:
        tf.Parse(text, config)
    except tf.ParseError as exc:
        return None, [_parse_problem(exc, where)]
    return config, []


def parse_config_file(path: str | Path) -> tuple[ModelConfig | None, list[Problem]]:
    """Read and parse a config.pbtxt file; see :func:`parse_config`.

    Raises:
        OSError: the file cannot be read, or is not a regular file (a FIFO is never waited on).
    """
    raw = read_regular(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Triton's parser (protobuf C++) takes the bytes as they are; latin-1 maps each byte to one
        # character, so the text parses here as it does there, positions included.
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        config, problems = parse_config(raw.decode("latin-1"), path)
        warning = Problem(
            "warning",
            codes.CONFIG_ENCODING,
            f"config.pbtxt is not UTF-8 (byte 0x{raw[exc.start]:02x}); Triton reads it, but strings in it "
            "reach the model as those bytes: save it as UTF-8",
            str(path),
            line=line,
            column=column,
        )
        return config, [warning, *problems]
    return parse_config(text, path)


def format_config(config: ModelConfig) -> str:
    """Render a ModelConfig message as config.pbtxt text (Triton's field names, one field per line)."""
    rendered: str = text_format().MessageToString(config)
    return rendered


def datatype_name(value: int) -> str:
    """``TYPE_FP32`` for the DataType enum value 11, ``TYPE_<n>`` for values the schema lacks."""
    enum = model_config_pb2().DataType
    try:
        name: str = enum.Name(value)
    except ValueError:
        return f"TYPE_{value}"
    return name


def _parse_problem(exc: Exception, where: str) -> Problem:
    line = exc.GetLine() if hasattr(exc, "GetLine") else None
    column = exc.GetColumn() if hasattr(exc, "GetColumn") else None
    detail = _POSITION_PREFIX.sub("", str(exc))

    field = _UNKNOWN_FIELD.search(detail)
    if field is not None:
        name = field.group("field")
        message_type = _MESSAGE_TYPE.search(detail)
        type_name = message_type.group("message") if message_type else "inference.ModelConfig"
        known = _field_names(type_name)
        message = f'unknown field "{name}" in {type_name}'
        message += _suggestion(name, known)
        return Problem("error", codes.CONFIG_UNKNOWN_FIELD, message, where, line=line, column=column)

    enum = _UNKNOWN_ENUM.search(detail)
    if enum is not None:
        value = enum.group("value")
        enum_type = enum.group("enum")
        message = f'{enum_type} has no value "{value}"'
        message += _suggestion(value, _enum_names(enum_type))
        return Problem("error", codes.CONFIG_INVALID_VALUE, message, where, line=line, column=column)

    if any(marker in detail for marker in _VALUE_ERRORS):
        return Problem("error", codes.CONFIG_INVALID_VALUE, detail, where, line=line, column=column)
    return Problem("error", codes.CONFIG_SYNTAX, detail, where, line=line, column=column)


def _suggestion(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f'; did you mean "{close[0]}"?' if close else ""


def _field_names(full_name: str) -> list[str]:
    descriptor = model_config_pb2().DESCRIPTOR
    pool = descriptor.pool
    try:
        message = pool.FindMessageTypeByName(full_name)
    except KeyError:
        return []
    return [field.name for field in message.fields]


def _enum_names(full_name: str) -> list[str]:
    pool = model_config_pb2().DESCRIPTOR.pool
    try:
        enum = pool.FindEnumTypeByName(full_name)
    except KeyError:
        return []
    return [value.name for value in enum.values]
