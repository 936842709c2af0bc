"""The control plane's JSON answers in the shapes of the AWS API, at one place: a WSGI filter on moto.

moto writes an unset structure, list or map as an empty one (``"VpcConfig": {}``, ``"Containers": []``,
``"DataCaptureConfig": {}``) and an unset member as ``null``; SageMaker and Application Auto Scaling leave
them out. boto3 does not mind, but a typed client does: the SageMaker SDK's ``sagemaker.core`` resource
classes are pydantic models generated from the same service model, and ``{}`` for a structure with
required members fails their validation.

:func:`conform_answers` wraps moto's WSGI application. Every successful answer of an operation of the
json-protocol services below goes through :func:`conform`, driven by botocore's output shape of that
operation — for every operation moto answers, not a list of fields:

- a member the output shape does not have, or a ``null``, is left out;
- an empty structure, list or map is left out (it was never set) unless the shape requires the member
  or it is the operation's result collection (botocore's paginator ``result_key``: ``ListModels``'
  ``Models``, ``ListTags``' ``Tags``, ``DescribeScalableTargets``' ``ScalableTargets`` ...), which
  AWS always writes, empty or not.

What moto does not know at all (a required member it never fills) is added where moto builds it, in
:mod:`._moto_patches`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["JSON_SERVICES", "conform", "conform_answers"]

logger = logging.getLogger(__name__)

WSGIApplication = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

JSON_SERVICES = {"SageMaker": "sagemaker", "AnyScaleFrontendService": "application-autoscaling"}
"""``X-Amz-Target`` prefix -> botocore service name, for the services whose answers are conformed."""

_ABSENT = object()
_models_lock = threading.Lock()
_models: dict[str, tuple[Any, Any]] = {}


def _service(service: str) -> tuple[Any, Any]:
    """botocore's service model and paginator model of ``service`` (loaded once; they are large)."""
    with _models_lock:
        if service not in _models:
            import botocore.session

            session = botocore.session.get_session()
            _models[service] = (session.get_service_model(service), session.get_paginator_model(service))
        return _models[service]


def _result_keys(paginators: Any, operation: str) -> frozenset[str]:
    try:
        config = paginators.get_paginator(operation)
    except ValueError:  # the operation has no paginator
        return frozenset()
    keys = config.get("result_key", ())
    keys = [keys] if isinstance(keys, str) else list(keys)
    return frozenset(key for key in keys if "." not in key)


def conform(service: str, operation: str, answer: Mapping[str, Any]) -> dict[str, Any]:
    """``answer`` (a decoded JSON body of ``operation``) in the output shape of botocore's ``service``.

    An operation botocore does not know is returned as it is.

    Example:
        >>> conform("sagemaker", "DescribeModel", {"ModelName": "m", "VpcConfig": {}, "Containers": []})
        {'ModelName': 'm'}
    """
    model, paginators = _service(service)
    try:
        shape = model.operation_model(operation).output_shape
    except Exception:  # botocore's OperationNotFoundError: not ours to judge
        return dict(answer)
    if shape is None:
        return dict(answer)
    return _structure(answer, shape, _result_keys(paginators, operation), operation)


def _structure(value: Mapping[str, Any], shape: Any, keep: frozenset[str], where: str) -> dict[str, Any]:
    conformed: dict[str, Any] = {}
    for name, member_value in value.items():
        member = shape.members.get(name)
        if member is None:
            logger.debug("%s: %s is not a member of %s; left out", where, name, shape.name)
            continue
        result = _value(member_value, member, f"{where}.{name}")
        if result is _ABSENT:
            if member_value is not None and (name in keep or name in shape.required_members):
                conformed[name] = member_value  # an empty collection that is meant
            continue
        conformed[name] = result
    return conformed


def _value(value: Any, shape: Any, where: str) -> Any:
    """``value`` conformed to ``shape``, or ``_ABSENT`` when it is unset (null or empty)."""
    if value is None:
        return _ABSENT
    kind = shape.type_name
    if kind == "structure" and isinstance(value, Mapping):
        structure = _structure(value, shape, frozenset(), where)
        return structure if structure else _ABSENT
    if kind == "list" and isinstance(value, list):
        items = [_item(item, shape.member, f"{where}[]") for item in value if item is not None]
        return items if items else _ABSENT
    if kind == "map" and isinstance(value, Mapping):
        entries = {
            key: _item(item, shape.value, f"{where}{{}}") for key, item in value.items() if item is not None
        }
        return entries if entries else _ABSENT
    return value


def _item(value: Any, shape: Any, where: str) -> Any:
    """A list item or map value: conformed, but kept even when empty (its position carries meaning)."""
    result = _value(value, shape, where)
    return value if result is _ABSENT else result


def _conformed_body(service: str, operation: str, body: bytes) -> bytes:
    try:
        answer = json.loads(body)
    except ValueError:
        return body
    if not isinstance(answer, dict):
        return body
    return json.dumps(conform(service, operation, answer)).encode()


def conform_answers(app: WSGIApplication) -> WSGIApplication:
    """Wrap moto's WSGI ``app``: successful answers of SageMaker and Application Auto Scaling operations
    are conformed to botocore's output shapes (:func:`conform`); everything else passes untouched."""

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        prefix, _, operation = str(environ.get("HTTP_X_AMZ_TARGET", "")).partition(".")
        service = JSON_SERVICES.get(prefix)
        if service is None or not operation:
            return app(environ, start_response)
        started: list[Any] = []
        written: list[bytes] = []

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., Any]:
            started[:] = [status, headers, exc_info]
            return written.append

        result = app(environ, capture)
        try:
            body = b"".join([*written, *result])
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        status, headers, exc_info = started
        if status.startswith("2") and body:
            body = _conformed_body(service, operation, body)
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            headers.append(("Content-Length", str(len(body))))
        if exc_info is not None:
            start_response(status, headers, exc_info)
        else:
            start_response(status, headers)
        return [body]

    return application
