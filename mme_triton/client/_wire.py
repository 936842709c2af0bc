"""InvokeEndpoint as botocore sends it, built from botocore's own parts without its per-call machinery.

A botocore client spends most of an ``invoke_endpoint`` call on its machinery (a dozen events emitted, the
request built and prepared through several layers, the answer parsed into a dict), more than a small
inference costs. :class:`Wire` takes the parts that make the request what it is from the client itself
and runs them directly:

- the request: botocore's ``rest-json`` serializer and parameter validator over the service model's
  InvokeEndpoint, and the URL botocore's endpoint rules resolve for the client (custom ``endpoint_url``,
  region, FIPS and dual-stack included), joined by botocore's ``prepare_request_dict``;
- the signature: SigV4 as the client's own ``RequestSigner`` signs, with credentials frozen from the
  client's credential provider (refreshed by it when they expire), by botocore's ``SigV4Auth`` once for
  each kind of request (``_signing.py``);
- the answer: a 2xx answer is the body and its ``Content-Type``; any other is parsed by botocore's parser
  for the protocol (modeled error fields included) and raised as the client's own ``ClientError`` class;
- the retries: botocore's retry handler of the client decides (``needs-retry``, whatever ``retries``
  mode the client has), and standard mode's retry quota is released after a success.

The HTTP exchange itself is the transports' (``_transports.py``). A client whose calls botocore would
route through anything else (an event handler this module does not know, such as a user's fault
injection or tracing hook, ``botocore.stub``, adaptive retries' rate limiter; an instrumented
``_make_api_call``; another signature version) keeps going through ``invoke_endpoint``: :attr:`Wire.hooks`
says so, and is read again whenever handlers are registered on the client.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import types
from collections.abc import Mapping
from typing import Any

import botocore
from botocore.awsrequest import HeadersDict, prepare_request_dict
from botocore.endpoint import convert_to_response_dict
from botocore.exceptions import ClientError
from botocore.handlers import add_recursion_detection_header
from botocore.httpsession import URLLib3Session
from botocore.serialize import create_serializer
from botocore.validate import validate_parameters

from mme_triton._sagemaker import error_code
from mme_triton.client._signing import Signer, remember

__all__ = ["Answer", "Wire", "WireRequest"]

logger = logging.getLogger(__name__)

_OPERATION = "InvokeEndpoint"
_BOTOCORE = os.path.dirname(os.path.abspath(botocore.__file__)) + os.sep
# What botocore emits around an InvokeEndpoint call; a handler on any of them that is not one of
# _KNOWN_HANDLERS sends the client's calls through botocore.
_CALL_EVENTS = (
    "provide-client-params",
    "before-parameter-build",
    "before-endpoint-resolution",
    "before-call",
    "request-created",
    "choose-signer",
    "before-sign",
    "before-send",
    "before-parse",
    "response-received",
    "needs-retry",
    "after-call",
    "after-call-error",
)
# moto registers it on every client once imported; it answers only while mock_aws is on.
_MOTO_STUBBER = "moto.core.botocore_stubber.BotocoreStubber"
# The handlers botocore itself puts on those events, and why the fast path may skip or replace each.
_KNOWN_HANDLERS = frozenset(
    {
        "botocore.handlers.generate_idempotent_uuid",  # InvokeEndpoint has no idempotency token
        "botocore.handlers._handle_request_validation_mode_member",  # nor a checksum member
        "botocore.handlers.add_recursion_detection_header",  # called by Wire.request
        "botocore.handlers.inject_api_version_header_if_needed",  # endpoint-discovery operations only
        "botocore.handlers.set_operation_specific_signer",  # InvokeEndpoint has no auth trait of its own
        "botocore.handlers._set_auth_scheme_preference_signer",  # SageMaker signs with SigV4 only
        "botocore.signers.RequestSigner.handler",  # the same signer, called by Wire.request
        "botocore.useragent.UserAgentString.rebuild_and_replace_user_agent_handler",  # set once
        "botocore.handlers.add_retry_headers",  # amz-sdk-invocation-id/-request: unsigned telemetry
        "botocore.retries.standard.MaxAttemptsSeeder.seed_max_attempts",  # the same telemetry
        "botocore.retryhandler.RetryHandler",  # legacy retries: emitted by Wire.retry_delay
        "botocore.retries.standard.RetryHandler.needs_retry",  # standard retries: the same
        "botocore.retries.standard.RetryQuotaChecker.release_retry_quota",  # Wire.succeeded
    }
)


class _Unsupported(Exception):
    """A client setting the fast path does not reproduce."""


class WireRequest:
    """One signed HTTP request: ``method``, ``url``, ``headers`` (str values) and ``body``.

    It has what botocore's SigV4 signer reads and writes (``context``, ``params``): a lighter stand-in
    for ``AWSRequest``, whose email-based header map costs as much as the signature. The signer only
    adds headers (``X-Amz-Date``, ``X-Amz-Security-Token``, ``Authorization``) to a request built once per
    attempt, so a plain dict serves.
    """

    __slots__ = ("body", "context", "headers", "method", "params", "url")

    def __init__(self, method: str, url: str, headers: dict[str, str], body: Any) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.context: dict[str, Any] = {}
        self.params: dict[str, Any] = {}


class Answer:
    """One HTTP answer, with the attribute names of botocore's ``AWSResponse`` that its parser and retry
    handlers read: ``status_code``, ``headers`` (a case-insensitive mapping) and ``content``."""

    __slots__ = ("content", "headers", "status_code", "url")

    def __init__(self, url: str, status_code: int, headers: Mapping[str, str], content: bytes) -> None:
        self.url = url
        self.status_code = status_code
        self.headers = headers
        self.content = content


def _handler_name(handler: Any) -> str:
    while isinstance(handler, functools.partial):
        handler = handler.func
    function = getattr(handler, "__func__", handler)  # a bound method's function
    if not hasattr(function, "__qualname__"):  # a callable object
        function = type(function)
    return f"{function.__module__}.{function.__qualname__}"


def _instrumented(client: Any) -> bool:
    """Whether ``_make_api_call`` was wrapped or replaced by code outside botocore (tracing libraries
    patch it, with wrapt's proxies or functions of their own)."""
    if "_make_api_call" in vars(client):
        return True
    method = type(client)._make_api_call
    if not isinstance(method, types.FunctionType):
        return True
    return not os.path.abspath(method.__code__.co_filename).startswith(_BOTOCORE)


class _Hooks:
    """Which of the client's handlers of an InvokeEndpoint call the fast path does not know.

    botocore's emitter replaces its lookup cache whenever a handler is registered or unregistered, so the
    scan runs again only then; a call costs one identity check. moto's stubber, which importing moto
    registers on every client, counts only while ``mock_aws`` is on (its ``enabled`` flag, read per call).
    """

    def __init__(self, client: Any, service: str) -> None:
        events = client.meta.events
        self._emitter = getattr(events, "_emitter", events)
        self._events = [
            f"{event}.{service}"
            if event == "before-endpoint-resolution"
            else f"{event}.{service}.{_OPERATION}"
            for event in _CALL_EVENTS
        ]
        self._seen: object = None
        self._unknown: str | None = "not read yet"
        self._switched: list[Any] = []
        self._lock = threading.Lock()

    def unknown(self) -> str | None:
        """A handler the fast path does not know (module and name), or ``None``."""
        cache = getattr(self._emitter, "_lookup_cache", None)
        if cache is None or cache is not self._seen:
            with self._lock:
                self._unknown, self._switched = self._scan()
                self._seen = cache
        if self._unknown is None and any(handler.enabled for handler in self._switched):
            return f"{_MOTO_STUBBER}: moto's mock_aws is on"
        return self._unknown

    def _scan(self) -> tuple[str | None, list[Any]]:
        handlers = getattr(self._emitter, "_handlers", None)
        if handlers is None or not hasattr(handlers, "prefix_search"):
            return "the client's event handlers cannot be read", []
        switched = []
        for event in self._events:
            for handler in handlers.prefix_search(event):
                name = _handler_name(handler)
                if name == _MOTO_STUBBER and isinstance(getattr(handler, "enabled", None), bool):
                    switched.append(handler)
                elif name not in _KNOWN_HANDLERS:
                    return f"{event}: {name}", []
        return None, switched


class Wire:
    """InvokeEndpoint for one botocore ``sagemaker-runtime`` client, without its per-call machinery.

    Build it with :meth:`of`, which says why a client cannot take this path. Thread-safe: it keeps no
    state per call but standard retries' quota, which is botocore's own (locked) object.
    """

    def __init__(self, client: Any, http_session: Any) -> None:
        self.client = client
        #: the client's ``URLLib3Session``: its TLS, socket and proxy settings are the client's
        self.http_session = http_session
        model = client.meta.service_model
        self.operation = model.operation_model(_OPERATION)
        self.service = model.service_id.hyphenize()
        self.hooks = _Hooks(client, self.service)
        self._serializer = create_serializer(model.resolved_protocol, include_validation=False)
        self._validate = bool(client.meta.config.parameter_validation)
        self._parser = client._endpoint._response_parser_factory.create_parser(model.resolved_protocol)
        self._signer = client._request_signer
        self._credentials = self._signer._credentials
        self._user_agent = client._user_agent_creator.to_string()
        url, headers, properties = client._resolve_endpoint_ruleset(self.operation, {"EndpointName": "-"}, {})
        if headers or properties.get("authSchemes"):
            # not in SageMaker's endpoint rules: headers to add, another signing name or region
            raise _Unsupported(f"the endpoint rules add {headers or properties}")
        #: the URL botocore's endpoint rules resolve for the client (a given ``endpoint_url`` as it is)
        self.endpoint_url: str = url
        self._urls: dict[str, str] = {}
        self._built: dict[tuple[tuple[str, Any], ...], tuple[str, dict[str, str]]] = {}
        self._signing = Signer(self._signer)
        self._retried = False

    @classmethod
    def of(cls, client: Any) -> tuple[Wire | None, str]:
        """The wire of ``client``, or ``None`` and why its calls must go through ``invoke_endpoint``."""
        try:
            if client.meta.service_model.service_name != "sagemaker-runtime":
                return None, f"not a sagemaker-runtime client: {client.meta.service_model.service_name}"
            if _instrumented(client):
                return None, "the client's _make_api_call is wrapped"
            http_session: Any = client._endpoint.http_session
            if not isinstance(http_session, URLLib3Session):
                return None, f"the client sends through {type(http_session).__name__}"
            signature = client._request_signer.signature_version
            if signature not in ("v4", botocore.UNSIGNED):
                return None, f"the client signs with {signature!r}"
            settings: Any = http_session  # botocore's stubs leave out its settings
            if client.meta.config.proxies_config or settings._proxy_config.proxy_url_for(
                client.meta.endpoint_url
            ):
                return None, "the client goes through a proxy"
            wire = cls(client, http_session)
        except _Unsupported as exc:
            return None, str(exc)
        except AttributeError as exc:  # a botocore without the parts read here
            return None, f"botocore's client lacks {exc.name or exc}"
        return wire, ""

    # -- the request ---------------------------------------------------------------------------------

    def url(self, path: str) -> str:
        """The full URL of ``path`` (``/endpoints/<name>/invocations``), joined as botocore joins it."""
        found = self._urls.get(path)
        if found is None:
            request: dict[str, Any] = {"url_path": path, "query_string": {}, "headers": {}}
            prepare_request_dict(request, self.endpoint_url)
            found = self._urls[path] = str(request["url"])
        return found

    def refresh_due(self) -> bool:
        """Whether signing would first refresh the credentials (a call to STS, IMDS, a process ...)."""
        refresh_needed = getattr(self._credentials, "refresh_needed", None)
        return bool(refresh_needed is not None and refresh_needed())

    def refresh(self) -> None:
        """Refresh the credentials now (their provider's call), so that signing does not wait on it."""
        if self._credentials is not None:
            self._credentials.get_frozen_credentials()

    def request(self, params: Mapping[str, Any]) -> WireRequest:
        """InvokeEndpoint with ``params`` (as ``invoke_endpoint`` takes them), signed.

        botocore's validator and serializer run once for each set of parameters but the body: what they
        make of them (the URL, the headers) is kept, and a ``bytes`` or ``bytearray`` body, which both
        take as it is, is joined to it (a client's requests repeat their endpoint, model and content
        type). Any other body goes through both every time.

        Raises:
            ParamValidationError: botocore refuses the parameters (when the client validates them).
            NoCredentialsError, NoRegionError: the client has no credentials or region to sign with.
        """
        body = params.get("Body")
        name: tuple[tuple[str, Any], ...] | None = None
        built = None
        if type(body) is bytes or type(body) is bytearray:
            name = tuple([item for item in params.items() if item[0] != "Body"])
            try:
                built = self._built.get(name)
            except TypeError:  # an unhashable parameter: botocore's validator says what it makes of it
                name = None
        if built is None:
            url, fixed, body = self._build(params)
            if name is not None:
                remember(self._built, name, (url, fixed))
        else:
            url, fixed = built
        serialized = {"headers": dict(fixed)}
        add_recursion_detection_header(serialized)  # per request: it reads the environment
        request = WireRequest("POST", url, serialized["headers"], body)
        if self._signer.signature_version is not botocore.UNSIGNED:
            self._signing.sign(request)
        return request

    def _build(self, params: Mapping[str, Any]) -> tuple[str, dict[str, str], Any]:
        """The URL, the headers and the body botocore's validator and serializer make of ``params``."""
        if self._validate:
            validate_parameters(params, self.operation.input_shape)
        serialized = self._serializer.serialize_to_request(params, self.operation)
        headers: dict[str, str] = serialized["headers"]
        headers["User-Agent"] = self._user_agent
        return self.url(serialized["url_path"]), headers, serialized["body"]

    # -- the answer ----------------------------------------------------------------------------------

    def error(self, answer: Answer) -> ClientError:
        """The ``ClientError`` botocore raises for a non-2xx answer (the client's own exception class)."""
        answer.headers = HeadersDict(answer.headers.items())
        response = convert_to_response_dict(answer, self.operation)
        parsed = self._parser.parse(response, self.operation.output_shape)
        self.client._endpoint._add_modeled_error_fields(response, parsed, self.operation, self._parser)
        probe = ClientError(parsed, _OPERATION)
        error_class = self.client.exceptions.from_code(error_code(probe))
        error: ClientError = error_class(parsed, _OPERATION)
        return error

    def retry_delay(
        self, attempts: int, answer: Answer | None, error: Exception, context: dict[str, Any]
    ) -> float | None:
        """Seconds to wait before sending the request again, as the client's retry handler decides, or
        ``None`` when it is not to be sent again. ``context`` is the call's (one dict per call)."""
        response = None
        if answer is not None and isinstance(error, ClientError):
            response = (answer, error.response)
        responses = self.client.meta.events.emit(
            f"needs-retry.{self.service}.{_OPERATION}",
            response=response,
            endpoint=self.client._endpoint,
            operation=self.operation,
            attempts=attempts,
            caught_exception=None if response is not None else error,
            request_dict={"context": context},
        )
        delay = next((value for _, value in responses if value is not None), None)
        if delay is None:
            return None
        self._retried = True
        return float(delay)

    def succeeded(self, answer: Answer, context: dict[str, Any]) -> None:
        """Tell the retry handler a call succeeded (standard mode's quota grows back), once it has retried:
        until then the quota is full and there is nothing to tell."""
        if self._retried:
            self.client.meta.events.emit(
                f"after-call.{self.service}.{_OPERATION}",
                http_response=answer,
                parsed={},
                model=self.operation,
                context=context,
            )
