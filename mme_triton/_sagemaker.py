"""SageMaker's rules, each defined once: every stage (and the embedded stack) imports them from here.

- InvokeEndpoint: the request-body limit (:data:`MAX_PAYLOAD_BYTES`), the 60 s the container has to
  answer, the 360 s a model's load may take (:data:`MODEL_LOAD_TIMEOUT_SECONDS`), the ``TargetModel``
  header (:data:`TARGET_MODEL_HEADER`) and the one TargetModel rule (:func:`target_model_problem`,
  :func:`check_target_model`);
- S3 URLs of a multi-model endpoint's ``ModelDataUrl`` (:func:`parse_s3_url`);
- the error code, message and HTTP status of a botocore ``ClientError`` (:func:`error_code`,
  :func:`error_message`, :func:`http_status`, :func:`is_not_found`, :func:`is_throttling`), and which
  failures are worth another try (:func:`is_transient`);
- which container of a model serves a multi-model endpoint (:func:`serving_container`), and the
  service-linked role Application Auto Scaling reports for a variant's scalable target
  (:func:`autoscaling_role_arn`);
- the CloudWatch metrics SageMaker publishes for an endpoint: their names, namespaces, dimensions and units
  (:data:`ENDPOINT_METRICS`);
- how a boto3 client is made from the AWS injection trio (:func:`make_client`), and a boto3 session whose
  clients default to one endpoint URL, the embedded stack's (:func:`endpoint_session`).

Only the standard library is imported at module level: the client, the artifact and endpoint stages and
the embedded stack all import this module, and none of them may pay for another's dependencies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config

__all__ = [
    "ARCHIVE_SUFFIX",
    "ENDPOINT_METRICS",
    "ENSEMBLE_CONFIG_PATTERN",
    "INSTANCE_METRICS_NAMESPACE",
    "INVOCATION_TIMEOUT_SECONDS",
    "MAX_PAYLOAD_BYTES",
    "METRICS_NAMESPACE",
    "METRIC_DIMENSIONS",
    "MODEL_LOAD_TIMEOUT_SECONDS",
    "TARGET_MODEL_HEADER",
    "TARGET_MODEL_MAX_CHARS",
    "TARGET_MODEL_PATTERN",
    "autoscaling_role_arn",
    "check_target_model",
    "endpoint_session",
    "error_code",
    "error_message",
    "http_status",
    "is_not_found",
    "is_throttling",
    "is_transient",
    "make_client",
    "model_data_url_of",
    "parse_s3_url",
    "serving_container",
    "target_model_problem",
]

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024
"""InvokeEndpoint's limit on the request body: 6 MiB (6,291,456 bytes); SageMaker answers HTTP 413 above."""

INVOCATION_TIMEOUT_SECONDS = 60.0
"""Seconds the container has to answer an InvokeEndpoint request (and a model load before
``ModelNotReadyException``)."""

MODEL_LOAD_TIMEOUT_SECONDS = 360.0
"""Seconds a multi-model endpoint gives a model's download and load before it gives up (requests that
waited 60 s for it were already answered ``ModelNotReadyException``)."""

TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"
"""The HTTP header that carries InvokeEndpoint's ``TargetModel`` to the container."""

TARGET_MODEL_MAX_CHARS = 1024
"""InvokeEndpoint: a TargetModel is 1 to 1024 characters."""

TARGET_MODEL_PATTERN = r"\A\S[\p{Print}]*\z"
"""InvokeEndpoint's pattern for ``TargetModel`` as the API reference writes it (Java regex syntax)."""

ENSEMBLE_CONFIG_PATTERN = re.compile(r'platform:\s*"ensemble"')
"""How SageMaker's Triton front-end (``sagemaker_server.cc``) tells the ensemble of a multi-directory archive:
this expression searched in the text of each model's config.pbtxt."""

ARCHIVE_SUFFIX = ".tar.gz"
"""What a multi-model endpoint's artifacts are named with: ``<prefix>/<name>.tar.gz`` is a TargetModel."""

METRICS_NAMESPACE = "AWS/SageMaker"
"""CloudWatch namespace of InvokeEndpoint's metrics and a multi-model endpoint's model-loading metrics."""

INSTANCE_METRICS_NAMESPACE = "/aws/sagemaker/Endpoints"
"""CloudWatch namespace of an endpoint's per-instance metrics (utilization; ``LoadedModelCount`` as AWS's
documentation lists it, which is why readers look its namespace up with ListMetrics)."""

METRIC_DIMENSIONS = ("EndpointName", "VariantName")
"""The dimensions of every endpoint metric: per production variant ("per-model metrics aren't supported")."""

ENDPOINT_METRICS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        # name: (namespace, unit), as SageMaker's "Metrics for monitoring Amazon SageMaker AI with
        # Amazon CloudWatch" and "CloudWatch Metrics for Multi-Model Endpoint Deployments" list them.
        # One value per InvokeEndpoint request:
        "Invocations": (METRICS_NAMESPACE, "None"),  # 1
        "InvocationsPerInstance": (METRICS_NAMESPACE, "None"),  # 1 / instances of the variant
        "Invocation4XXErrors": (METRICS_NAMESPACE, "None"),  # 1 when the model answered 4xx, else 0
        "Invocation5XXErrors": (METRICS_NAMESPACE, "None"),  # 1 when the model answered 5xx, else 0
        "InvocationModelErrors": (METRICS_NAMESPACE, "None"),  # 1 when the model gave no 2xx, else 0
        "ModelLatency": (METRICS_NAMESPACE, "Microseconds"),
        "OverheadLatency": (METRICS_NAMESPACE, "Microseconds"),
        "ModelCacheHit": (METRICS_NAMESPACE, "None"),  # 1 when the model was loaded already, else 0
        "ModelLoadingWaitTime": (METRICS_NAMESPACE, "Microseconds"),  # per request that waited
        # One value per model download, load, unload:
        "ModelDownloadingTime": (METRICS_NAMESPACE, "Microseconds"),
        "ModelLoadingTime": (METRICS_NAMESPACE, "Microseconds"),
        "ModelUnloadingTime": (METRICS_NAMESPACE, "Microseconds"),
        # One value per instance and minute:
        "LoadedModelCount": (INSTANCE_METRICS_NAMESPACE, "None"),
        "CPUUtilization": (INSTANCE_METRICS_NAMESPACE, "Percent"),  # 100 per core
        "MemoryUtilization": (INSTANCE_METRICS_NAMESPACE, "Percent"),
        "DiskUtilization": (INSTANCE_METRICS_NAMESPACE, "Percent"),
        "GPUUtilization": (INSTANCE_METRICS_NAMESPACE, "Percent"),  # 100 per GPU
        "GPUMemoryUtilization": (INSTANCE_METRICS_NAMESPACE, "Percent"),  # 100 per GPU
    }
)
"""SageMaker's endpoint metrics: name -> (CloudWatch namespace, unit). Dimensions: :data:`METRIC_DIMENSIONS`;
published every minute."""

# The API reference's patterns are Java regular expressions. Without flags, Java's \s is [ \t\n\x0B\f\r]
# and \p{Print} is printable US-ASCII ([\x20-\x7E]), so \S admits any other character, non-ASCII included.
_TARGET_MODEL = re.compile(r"\A[^ \t\n\x0b\f\r][\x20-\x7e]*\Z", re.DOTALL)
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_NOT_FOUND_CODES = frozenset({"ResourceNotFound", "ResourceNotFoundException", "NotFound", "404"})
_THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestThrottled",
        "RequestThrottledException",
        "RequestLimitExceeded",
        "SlowDown",
        "ProvisionedThroughputExceededException",
    }
)

# Answers AWS services give for a request they could not serve this time (botocore's standard retry mode
# treats the same codes and statuses as transient).
_TRANSIENT_CODES = frozenset(
    {
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "InternalFailure",
        "InternalError",
        "InternalServerError",
        "InternalServerException",
        "ServiceUnavailable",
    }
)
_TRANSIENT_STATUSES = frozenset({500, 502, 503, 504})


# -- TargetModel -------------------------------------------------------------------------------------


def target_model_problem(name: object) -> str | None:
    """Why ``name`` cannot be a TargetModel, or ``None`` when InvokeEndpoint accepts it.

    The rule is InvokeEndpoint's: 1 to 1024 characters matching ``\\A\\S[\\p{Print}]*\\z`` — the first
    character anything but whitespace, the others printable ASCII (spaces included).

    Example:
        >>> target_model_problem("resnet.tar.gz") is None
        True
        >>> target_model_problem(" resnet.tar.gz")
        'a TargetModel must not start with whitespace'
    """
    if not isinstance(name, str):
        return f"a TargetModel must be a str, not {type(name).__name__}"
    if not name:
        return "a TargetModel must not be empty"
    if len(name) > TARGET_MODEL_MAX_CHARS:
        return f"a TargetModel has at most {TARGET_MODEL_MAX_CHARS} characters, this one has {len(name)}"
    if _TARGET_MODEL.match(name) is None:
        if name[0] in " \t\n\x0b\f\r":
            return "a TargetModel must not start with whitespace"
        bad = next(c for c in name[1:] if not " " <= c <= "~")
        return f"a TargetModel may hold only printable ASCII after its first character, not {bad!r}"
    return None


def check_target_model(name: str) -> str:
    """Return ``name`` if InvokeEndpoint accepts it as a TargetModel (see :func:`target_model_problem`).

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: it breaks the rule; the message says how.

    Example:
        >>> check_target_model("linear.tar.gz")
        'linear.tar.gz'
    """
    problem = target_model_problem(name)
    if problem is None:
        return name
    if not isinstance(name, str):
        raise TypeError(problem)
    shown = name if len(name) <= 80 else name[:77] + "..."
    raise ValueError(f"{shown!r} is not a valid TargetModel: {problem} (pattern {TARGET_MODEL_PATTERN})")


# -- S3 URLs -----------------------------------------------------------------------------------------


def parse_s3_url(url: str) -> tuple[str, str]:
    """Split an ``s3://bucket/prefix/`` URL (a ModelDataUrl) into ``(bucket, prefix)``.

    The prefix comes back empty (the bucket's root) or ending with ``/``, with or without a trailing
    slash in ``url``: ``"s3://models/mme"`` and ``"s3://models/mme/"`` both give ``("models", "mme/")``.
    SageMaker serves ``<prefix><TargetModel>`` from it.

    Raises:
        TypeError: ``url`` is not a string.
        ValueError: not an ``s3://`` URL, an invalid bucket name, an empty path segment (``a//b``), or a
            URL naming a ``.tar.gz`` object (a ModelDataUrl is the prefix the artifacts sit under).

    Example:
        >>> parse_s3_url("s3://my-bucket/mme/models")
        ('my-bucket', 'mme/models/')
    """
    if not isinstance(url, str):
        raise TypeError(f"an S3 URL must be a str, not {type(url).__name__}")
    if not url.startswith("s3://"):
        raise ValueError(f"{url!r} is not an S3 URL; expected s3://bucket/prefix/")
    bucket, _, key = url[len("s3://") :].partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise ValueError(f"{url!r}: {bucket!r} is not a valid S3 bucket name")
    prefix = key.rstrip("/")
    if "//" in prefix or key.startswith("/"):
        raise ValueError(f"{url!r} has an empty path segment ('//')")
    if prefix.endswith(ARCHIVE_SUFFIX):
        raise ValueError(
            f"{url!r} names an artifact; give the prefix the artifacts sit under (the ModelDataUrl), "
            f"e.g. s3://{bucket}/{prefix.rpartition('/')[0]}"
        )
    return bucket, f"{prefix}/" if prefix else ""


# -- errors ------------------------------------------------------------------------------------------


def _error(exc: BaseException) -> Mapping[str, Any]:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        error = response.get("Error")
        if isinstance(error, Mapping):
            return error
    return {}


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ``ClientError`` (``"ValidationException"`` ...); ``""`` otherwise.

    Example:
        >>> from botocore.exceptions import ClientError
        >>> error_code(ClientError({"Error": {"Code": "ThrottlingException"}}, "DescribeEndpoint"))
        'ThrottlingException'
    """
    return str(_error(exc).get("Code", "") or "")


def error_message(exc: BaseException) -> str:
    """The AWS error message of a ``ClientError``, or ``str(exc)`` when it carries none."""
    return str(_error(exc).get("Message", "") or "") or str(exc)


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of the answer behind a ``ClientError``, ``None`` when unknown."""
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping):
        return None
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    try:
        return int(status) if status is not None else None
    except (TypeError, ValueError):
        return None


def is_not_found(exc: BaseException) -> bool:
    """Whether ``exc`` says the resource does not exist.

    SageMaker answers a missing model, endpoint config or endpoint with ``ValidationException`` "Could
    not find ..."; other services use ``ResourceNotFoundException`` or ``NotFound``.
    """
    code = error_code(exc)
    if code in _NOT_FOUND_CODES:
        return True
    message = str(_error(exc).get("Message", "")).lower()
    return code == "ValidationException" and ("could not find" in message or "does not exist" in message)


def is_throttling(exc: BaseException) -> bool:
    """Whether ``exc`` is an AWS throttling error (``ThrottlingException``, ``TooManyRequests`` ...)."""
    return error_code(exc) in _THROTTLING_CODES or (http_status(exc) == 429 and not error_code(exc))


def is_transient(exc: BaseException) -> bool:
    """Whether the same call may succeed if sent again: throttling, a 5xx answer, a dropped connection.

    A botocore ``ClientError`` counts when :func:`is_throttling` says so, when its code is one of the
    codes AWS uses for "could not serve this now" (``InternalFailure``, ``ServiceUnavailable``,
    ``RequestTimeout`` ...) or its HTTP status is 500, 502, 503 or 504. Of botocore's own errors, the
    connection errors count (``EndpointConnectionError``, ``ConnectTimeoutError``,
    ``ConnectionClosedError``, ``ReadTimeoutError`` ...), except TLS and proxy failures, which a retry
    does not cure.

    Example:
        >>> from botocore.exceptions import ClientError, EndpointConnectionError
        >>> is_transient(ClientError({"Error": {"Code": "ThrottlingException"}}, "DescribeEndpoint"))
        True
        >>> is_transient(EndpointConnectionError(endpoint_url="https://api.sagemaker.eu-west-1.amazonaws.com"))
        True
        >>> is_transient(ClientError({"Error": {"Code": "ValidationException"}}, "DescribeEndpoint"))
        False
    """
    from botocore import exceptions

    if isinstance(exc, exceptions.ClientError):
        return (
            is_throttling(exc)
            or error_code(exc) in _TRANSIENT_CODES
            or http_status(exc) in _TRANSIENT_STATUSES
        )
    if isinstance(exc, exceptions.SSLError | exceptions.ProxyConnectionError):
        return False
    return isinstance(exc, exceptions.ConnectionError | exceptions.HTTPClientError)


# -- models and containers ---------------------------------------------------------------------------


def serving_container(model: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The container of a DescribeModel answer that serves the endpoint's models.

    A multi-model endpoint's model has one container: ``PrimaryContainer``, or a one-element
    ``Containers``. When ``Containers`` holds several (an inference pipeline), the one in ``MultiModel``
    mode serves the TargetModels, else the first. ``None`` when the model has no container at all.
    """
    primary = model.get("PrimaryContainer")
    if isinstance(primary, Mapping) and primary:
        return primary
    containers = [c for c in model.get("Containers") or () if isinstance(c, Mapping)]
    for container in containers:
        if container.get("Mode") == "MultiModel":
            return container
    return containers[0] if containers else None


def model_data_url_of(model: Mapping[str, Any]) -> str | None:
    """The ``ModelDataUrl`` of the container that serves a model (see :func:`serving_container`)."""
    container = serving_container(model)
    url = container.get("ModelDataUrl") if container is not None else None
    return str(url) if url else None


def autoscaling_role_arn(account_id: str, partition: str = "aws") -> str:
    """The ``RoleARN`` of a SageMaker variant's scalable target: Application Auto Scaling's service-linked
    role for SageMaker endpoints (what ``DescribeScalableTargets`` reports when no role was given).

    Example:
        >>> autoscaling_role_arn("123456789012").rsplit("/", 1)[1]
        'AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint'
    """
    return (
        f"arn:{partition}:iam::{account_id}:role/aws-service-role/"
        "sagemaker.application-autoscaling.amazonaws.com/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
    )


# -- boto3 clients -----------------------------------------------------------------------------------


def make_client(
    service: str,
    *,
    client: Any = None,
    boto3_session: boto3.Session | None = None,
    boto_config: Config | None = None,
    default_config: Config | None = None,
    region: str | None = None,
) -> Any:
    """A boto3 client for ``service``: ``client`` itself when given, else one from the session.

    Every AWS-facing entry point of the library takes the same trio: ``boto3_session=``,
    ``boto_config=`` and a ready client that wins over both. ``boto_config`` is merged over the stage's
    ``default_config`` (its settings win; those it leaves unset keep the stage's defaults), the same way
    in every stage. A ``sagemaker.Session`` passed as ``boto3_session`` stands for its ``boto_session``.
    """
    if client is not None:
        return client
    from mme_triton._sdk import boto3_session_of

    boto3_session = boto3_session_of(boto3_session, None)  # a sagemaker.Session passed as a boto3 one
    if boto3_session is None:
        boto3_session = new_boto3_session()
    config = boto_config
    if default_config is not None:
        config = default_config if boto_config is None else default_config.merge(boto_config)
    kwargs: dict[str, Any] = {"config": config}
    if region is not None:
        kwargs["region_name"] = region
    session: Any = boto3_session
    return session.client(service, **kwargs)


_ENDPOINT_SESSION: list[type[Any]] = []
_SHARED_LOADER: list[Any] = []


def new_boto3_session(**session_kwargs: Any) -> boto3.Session:
    """A new ``boto3.Session(**session_kwargs)`` whose service models come from one loader per process.

    botocore reads and parses a service's JSON model (several MB for SageMaker and S3) once per session:
    a fresh session costs 0.2-0.5 s for its first client of each service. The library creates a session
    where the caller gave none; sharing botocore's data loader makes each one cost that only once per
    process. Credentials, region and profile stay per session.
    """
    import boto3

    session: boto3.Session = _with_shared_loader(boto3.Session, session_kwargs)
    return session


def _with_shared_loader(cls: Any, session_kwargs: dict[str, Any], *args: Any) -> Any:
    import botocore.loaders
    import botocore.session

    if not _SHARED_LOADER:
        _SHARED_LOADER.append(botocore.loaders.create_loader())
    loader = _SHARED_LOADER[0]
    core = botocore.session.get_session()
    core.register_component("data_loader", loader)
    paths = list(loader.search_paths)
    session = cls(*args, botocore_session=core, **session_kwargs)
    # boto3 appends its own data directory to the loader's search paths for every new session
    loader.search_paths[:] = list(dict.fromkeys(paths + loader.search_paths))
    return session


def endpoint_session(
    endpoint_url: str, service_urls: Mapping[str, str] | None = None, **session_kwargs: Any
) -> boto3.Session:
    """A boto3 session whose clients and resources default to ``endpoint_url`` (or, for a service named
    in ``service_urls``, to its own URL); S3 clients default to path-style addressing.

    An ``endpoint_url=`` or ``config=`` given to ``client()`` still wins (a given config is merged over
    the path-style default). ``session_kwargs`` go to ``boto3.Session`` (``profile_name``,
    ``region_name``, credentials). The process environment is not touched.
    """
    if not _ENDPOINT_SESSION:
        import boto3
        from botocore.config import Config

        class EndpointSession(boto3.Session):
            def __init__(self, url: str, urls: Mapping[str, str], **kwargs: Any) -> None:
                super().__init__(**kwargs)
                self.endpoint_url = url
                self.service_urls = dict(urls)

            def _defaults(self, service_name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
                if kwargs.get("endpoint_url") is None:
                    kwargs["endpoint_url"] = self.service_urls.get(service_name, self.endpoint_url)
                if service_name == "s3":
                    path_style = Config(s3={"addressing_style": "path"})
                    given: Config | None = kwargs.get("config")
                    kwargs["config"] = path_style if given is None else path_style.merge(given)
                return kwargs

            def client(self, service_name: str, *args: Any, **kwargs: Any) -> Any:
                parent: Any = super()
                return parent.client(service_name, *args, **self._defaults(service_name, kwargs))

            def resource(self, service_name: str, *args: Any, **kwargs: Any) -> Any:
                parent: Any = super()
                return parent.resource(service_name, *args, **self._defaults(service_name, kwargs))

        _ENDPOINT_SESSION.append(EndpointSession)
    session: boto3.Session = _with_shared_loader(
        _ENDPOINT_SESSION[0], dict(session_kwargs), endpoint_url, service_urls or {}
    )
    return session
