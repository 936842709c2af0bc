"""Names Triton can take, and Triton's messages put back in the user's names.

Triton's python backend starts each model instance's stub through ``bash -c`` with the model's name and
its file's path unquoted (``stub_launcher.cc``), and every model on the stack runs on the python backend. A
TargetModel may hold any printable ASCII (``my model.tar.gz``, ``v2/linear.tar.gz``, ``a;b.tar.gz``): such a
name would split into several words, or run as a command. The stack loads a model whose TargetModel is
not made of shell-safe characters under an alias (:func:`triton_model_name`) and answers under its
TargetModel again (:func:`rename_in_response`, :func:`user_message`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["is_shell_safe", "rename_in_response", "triton_model_name", "user_message"]

_SAFE = re.compile(r"[A-Za-z0-9._-]+")
_UNSAFE_CHARACTER = re.compile(r"[^A-Za-z0-9._-]")
_JSON_HEADER_SIZE = re.compile(r"json-header-size=(\d+)")


def is_shell_safe(text: str) -> bool:
    """Whether ``text`` is one shell word with no character a shell acts on (letters, digits, ``._-``)."""
    return bool(_SAFE.fullmatch(text))


def triton_model_name(target_model: str) -> str:
    """The name ``target_model`` is loaded under in Triton: itself when it is shell-safe, else an alias.

    The alias keeps the safe characters (others become ``_``) and ends with 8 hex digits of the name's
    MD5, so two TargetModels never share one.

    Example:
        >>> triton_model_name("linear.tar.gz")
        'linear.tar.gz'
        >>> triton_model_name("my model.tar.gz")
        'my_model.tar.gz-621f6e7d'
    """
    if is_shell_safe(target_model):
        return target_model
    digest = hashlib.md5(target_model.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]
    return f"{_UNSAFE_CHARACTER.sub('_', target_model)[:200]}-{digest}"


def user_message(message: str, replacements: Iterable[tuple[str, str]]) -> str:
    """``message`` with each ``(old, new)`` of ``replacements`` replaced, longest ``old`` first."""
    for old, new in sorted((r for r in replacements if r[0]), key=lambda r: -len(r[0])):
        message = message.replace(old, new)
    return message


def rename_in_response(body: bytes, content_type: str, alias: str, target_model: str) -> tuple[bytes, str]:
    """Triton's answer for a model loaded as ``alias``, as it reads for ``target_model``.

    Triton names the model in the response's JSON header (``"model_name":"<alias>"``); for a binary
    response the ``json-header-size`` of the Content-Type changes with it. Nothing else is touched: the
    tensors' bytes are copied once, not parsed.
    """
    import json

    old = b'"model_name":' + json.dumps(alias).encode()
    new = b'"model_name":' + json.dumps(target_model).encode()
    match = _JSON_HEADER_SIZE.search(content_type)
    header_size = int(match.group(1)) if match else len(body)
    at = body.find(old, 0, header_size)
    if at < 0:
        return body, content_type
    renamed = body[:at] + new + body[at + len(old) :]
    if match:
        size = header_size + len(new) - len(old)
        content_type = content_type[: match.start(1)] + str(size) + content_type[match.end(1) :]
    return renamed, content_type
