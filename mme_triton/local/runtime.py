"""The InvokeEndpoint side of the embedded stack: the part SageMaker's platform plays on an MME instance.

SageMaker's runtime answers ``POST /endpoints/<name>/invocations`` (the route boto3's ``sagemaker-runtime``
client calls) for a multi-model endpoint like this:

1. the endpoint must exist and be in service, else a ``ValidationError``;
2. the body may be at most 6 MiB (6,291,456 bytes), else HTTP 413;
3. on the first call for a ``TargetModel`` the platform downloads ``<ModelDataUrl>/<TargetModel>`` from
   S3, extracts it under ``/opt/ml/models/<hash>/model`` and asks the container to load it
   (``POST /models``), answering ``ModelNotReadyException`` when that takes more than 60 s; the model
   stays loaded until memory runs short, and then the least recently used models are unloaded
   (``DELETE /models/<hash>``);
4. the request goes to ``POST /models/<hash>/invoke``; a 2xx answer is passed back as it is, anything
   else becomes a ``ModelError`` (HTTP 424) carrying the container's status and body.

:class:`InvocationRuntime` does all of that for the embedded stack, in front of moto's server as a WSGI
middleware, with one real :class:`~mme_triton.local.triton.TritonServer` per in-service endpoint. The
error answers have the shapes of ``botocore``'s ``sagemaker-runtime`` service model and the messages
SageMaker sends, so boto3 raises the same ``ClientError`` codes it raises against AWS.

Memory budget: the least recently used models are unloaded when the **on-disk size of the extracted
model directories** loaded in one endpoint's Triton goes over the budget (default 2 GiB), and/or when
more than ``max_models`` are loaded. On-disk size is deterministic and known before the load; it is a
proxy for resident memory (ONNX weights take about their file size; every model instance, ONNX ones
included, also runs in a python-backend stub process of ~40-70 MB that the budget does not see). A single
model larger than the budget is still loaded (alone).

Loads: a request for a model that is not loaded yet waits while it is downloaded and loaded, for at most
60 s (``ready_timeout``); a longer load goes on in the background and the request is answered
``ModelNotReadyException`` (HTTP 429) to be retried, as SageMaker does. Concurrent first requests for one
model share a single load. Unloads run on a background thread, after the requests that use the model have
finished.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import http
import http.client
import json
import logging
import queue
import re
import shutil
import tarfile
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote

from mme_triton.errors import LocalStackError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "DEFAULT_READY_TIMEOUT",
    "MAX_PAYLOAD_BYTES",
    "ExtractedModel",
    "InvocationRuntime",
    "ModelArchiveError",
    "ModelDataNotFoundError",
    "ModelLRU",
    "RuntimeResponse",
    "directory_size",
    "endpoint_not_found",
    "internal_failure",
    "model_data_not_found",
    "model_error",
    "model_not_ready",
    "payload_too_large",
    "safe_extract",
    "target_model_hash",
    "validation_error",
]

logger = logging.getLogger(__name__)

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024
"""InvokeEndpoint's limit on the request body: 6 MiB."""

DEFAULT_MEMORY_BUDGET = 2 * 1024**3
"""Default budget: 2 GiB of extracted model files loaded per endpoint."""

DEFAULT_READY_TIMEOUT = 60.0
"""Seconds a request waits for its model's download and load before ``ModelNotReadyException``."""

TARGET_MODEL_HEADER = "X-Amzn-SageMaker-Target-Model"
_INVOCATIONS = re.compile(r"^/endpoints/(?P<name>[^/]+)/invocations/?$")
_ENSEMBLE = re.compile(r'platform\s*:\s*"ensemble"')
_PRINTABLE = re.compile(r"^[\x20-\x7e]+$")
_MAX_TARGET_MODEL = 1024
_COPY_CHUNK = 1024 * 1024


# ------------------------------------------------------------------------------------------- errors


class ModelArchiveError(LocalStackError):
    """A model archive was refused: an unsafe member (absolute path, ``..``, link, device) or a layout
    that is not one model directory (or an ensemble with its steps); ``member`` names the entry."""

    def __init__(self, message: str, *, member: str | None = None) -> None:
        self.member = member
        super().__init__(message)


class ModelDataNotFoundError(LocalStackError):
    """``<ModelDataUrl>/<TargetModel>`` is not in S3."""

    def __init__(self, bucket: str, key: str) -> None:
        self.bucket = bucket
        self.key = key
        super().__init__(f"s3://{bucket}/{key} does not exist")


# ---------------------------------------------------------------------------------- response shapes


@dataclass(frozen=True)
class RuntimeResponse:
    """One HTTP answer of the runtime: status, headers and body, as the WSGI layer sends them."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def status_line(self) -> str:
        """``"424 Failed Dependency"``: the WSGI status string."""
        try:
            phrase = http.HTTPStatus(self.status).phrase
        except ValueError:
            phrase = "Unknown"
        return f"{self.status} {phrase}"


def _request_id() -> str:
    return str(uuid.uuid4())


def _json_error(status: int, error_type: str, document: Mapping[str, Any]) -> RuntimeResponse:
    body = json.dumps(document).encode()
    return RuntimeResponse(
        status,
        [
            ("Content-Type", "application/json"),
            ("x-amzn-ErrorType", error_type),
            ("x-amzn-RequestId", _request_id()),
            ("Content-Length", str(len(body))),
        ],
        body,
    )


def validation_error(message: str) -> RuntimeResponse:
    """A ``ValidationError`` (HTTP 400), the error SageMaker gives for a request it refuses itself.

    Example:
        >>> validation_error("Endpoint e of account 123456789012 not found.").status
        400
    """
    return _json_error(400, "ValidationError", {"Message": message})


def endpoint_not_found(endpoint_name: str, account_id: str) -> RuntimeResponse:
    """SageMaker's answer for an endpoint that does not exist or is not in service."""
    return validation_error(f"Endpoint {endpoint_name} of account {account_id} not found.")


def model_data_not_found(bucket: str, key: str) -> RuntimeResponse:
    """SageMaker's answer when ``<ModelDataUrl>/<TargetModel>`` cannot be downloaded."""
    return validation_error(
        f"Failed to download model data(bucket: {bucket}, key: {key}). Please ensure that there is an "
        "object located at the URL and that the role passed to CreateModel has permissions to download "
        "the model."
    )


def payload_too_large(limit: int = MAX_PAYLOAD_BYTES) -> RuntimeResponse:
    """SageMaker's answer for a body over the limit: HTTP 413 with a plain-text message.

    It carries no error type, so botocore raises a ``ClientError`` whose code is ``"413"``.
    """
    body = f"HTTP content length exceeded {limit} bytes.".encode()
    return RuntimeResponse(
        413,
        [
            ("Content-Type", "text/plain"),
            ("x-amzn-RequestId", _request_id()),
            ("Content-Length", str(len(body))),
        ],
        body,
    )


def model_not_ready(target_model: str, waited: float) -> RuntimeResponse:
    """A ``ModelNotReadyException`` (HTTP 429): the model is still downloading or loading; retry.

    Example:
        >>> model_not_ready("big.tar.gz", 60.0).status
        429
    """
    return _json_error(
        429,
        "ModelNotReadyException",
        {
            "Message": (
                f"Model {target_model} is not ready after {waited:g} seconds: it is still being downloaded "
                "or loaded. Retry the request."
            )
        },
    )


def internal_failure(message: str) -> RuntimeResponse:
    """An ``InternalFailure`` (HTTP 500): the stack itself failed (e.g. its Triton died)."""
    return _json_error(500, "InternalFailure", {"Message": message})


def model_error(
    original_status: int,
    original_body: bytes,
    *,
    endpoint_name: str,
    region: str,
    account_id: str,
) -> RuntimeResponse:
    """A ``ModelError`` (HTTP 424): the container answered ``original_status`` with ``original_body``.

    The JSON body has SageMaker's fields: ``ErrorCode`` (``CLIENT_ERROR_FROM_MODEL`` for a 4xx,
    ``SERVER_ERROR_FROM_MODEL`` otherwise), ``LogStreamArn``, ``Message`` (quoting the container's body
    and pointing at the endpoint's log group), ``OriginalMessage`` and ``OriginalStatusCode``.

    Example:
        >>> r = model_error(400, b'{"error":"bad"}', endpoint_name="e", region="us-east-1",
        ...                 account_id="123456789012")
        >>> r.status, json.loads(r.body)["OriginalStatusCode"]
        (424, 400)
    """
    original = original_body.decode("utf-8", "replace")
    kind = "client" if 400 <= original_status < 500 else "server"
    log_group = f"/aws/sagemaker/Endpoints/{endpoint_name}"
    console = (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}"
        f"#logEventViewer:group={log_group}"
    )
    return _json_error(
        424,
        "ModelError",
        {
            "ErrorCode": f"{kind.upper()}_ERROR_FROM_MODEL",
            "LogStreamArn": f"arn:aws:logs:{region}:{account_id}:log-group:{log_group}",
            "Message": (
                f'Received {kind} error ({original_status}) from primary with message "{original}". '
                f"See {console} in account {account_id} for more information."
            ),
            "OriginalMessage": original,
            "OriginalStatusCode": original_status,
        },
    )


# ----------------------------------------------------------------------------------- safe extraction


@dataclass(frozen=True)
class ExtractedModel:
    """An archive extracted by :func:`safe_extract`."""

    path: Path
    """The directory to load (``POST /models`` url): it holds the model directory or directories."""
    model_dirs: tuple[str, ...]
    """The model directories found in it, the one served first (the ensemble, if any)."""
    size: int
    """Bytes of regular files extracted."""


def _check_member(member: tarfile.TarInfo) -> PurePosixPath | None:
    """The member's normalised relative path, ``None`` for the archive root; raise if it is unsafe."""
    name = member.name
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise ModelArchiveError(f"refusing archive member with an absolute path: {name!r}", member=name)
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ModelArchiveError(
            f"refusing archive member that leaves the archive ('..'): {name!r}", member=name
        )
    if member.issym() or member.islnk():
        raise ModelArchiveError(
            f"refusing archive member that is a link: {name!r} -> {member.linkname!r}", member=name
        )
    if member.ischr() or member.isblk():
        raise ModelArchiveError(f"refusing archive member that is a device file: {name!r}", member=name)
    if not (member.isreg() or member.isdir()):
        raise ModelArchiveError(
            f"refusing archive member that is neither a file nor a directory: {name!r}", member=name
        )
    return PurePosixPath(*parts) if parts else None


def _ensembles(root: Path, dirs: Iterable[str]) -> list[str]:
    found = []
    for name in dirs:
        config = root / name / "config.pbtxt"
        with contextlib.suppress(OSError):
            if _ENSEMBLE.search(config.read_text(errors="replace")):
                found.append(name)
    return found


def safe_extract(archive: str | Path | IO[bytes], destination: str | Path) -> ExtractedModel:
    """Extract a model archive (``.tar.gz`` or any tar) into ``destination``, refusing anything unsafe.

    Every member is checked before anything is written: no absolute paths, no ``..``, no symbolic or hard
    links, no device files or FIFOs; the extraction itself then runs with tarfile's ``"data"`` filter
    (where the Python has it), which also drops set-uid bits and foreign owners. The layout must be one
    model directory at the archive root, or several where exactly one is an ensemble (its steps beside
    it); a model whose ``config.pbtxt`` sits at the archive root is moved into a ``model/`` directory.

    Parameters:
        archive: a path or a binary file object positioned at the archive's start.
        destination: the directory to extract into (created; should be empty).

    Returns:
        An :class:`ExtractedModel`; its ``path`` is ``destination``.

    Raises:
        ModelArchiveError: an unsafe member (``member`` names it), an unreadable archive or an unexpected
            layout. Nothing is extracted when a member is unsafe.

    Example:
        >>> extracted = safe_extract("linear.tar.gz", "/tmp/linear")  # doctest: +SKIP
        >>> extracted.model_dirs
        ('linear',)
    """
    destination = Path(destination)
    try:
        tar = (
            tarfile.open(archive, mode="r:*")  # noqa: SIM115 - closed by the with-block below
            if isinstance(archive, (str, Path))
            else tarfile.open(fileobj=archive, mode="r:*")  # noqa: SIM115
        )
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ModelArchiveError(f"cannot read the model archive: {exc}") from exc
    with tar:
        try:
            members = tar.getmembers()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ModelArchiveError(f"cannot read the model archive: {exc}") from exc
        paths: list[tuple[tarfile.TarInfo, PurePosixPath]] = []
        for member in members:
            path = _check_member(member)
            if path is not None:
                paths.append((member, path))
        top_files = {p.parts[0] for m, p in paths if len(p.parts) == 1 and m.isreg()}
        top_dirs = sorted({p.parts[0] for m, p in paths if len(p.parts) > 1 or m.isdir()})
        prefix = PurePosixPath("model") if "config.pbtxt" in top_files else None
        if prefix is None and not top_dirs:
            raise ModelArchiveError("the model archive holds no model directory")
        destination.mkdir(parents=True, exist_ok=True)
        size = 0
        data_filter = getattr(tarfile, "data_filter", None)
        for member, path in paths:
            target = prefix / path if prefix is not None else path
            member = copy.copy(member)
            member.name = str(target)
            if data_filter is not None:
                try:
                    member = data_filter(member, str(destination))
                except tarfile.FilterError as exc:
                    raise ModelArchiveError(
                        f"refusing archive member {path}: {exc}", member=str(path)
                    ) from exc
            if member.isreg():
                size += member.size
            try:
                tar.extract(member, destination, set_attrs=False, **_no_filter())
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise ModelArchiveError(f"cannot extract {path}: {exc}", member=str(path)) from exc
    if prefix is not None:
        return ExtractedModel(destination, ("model",), size)
    if len(top_dirs) == 1:
        return ExtractedModel(destination, (top_dirs[0],), size)
    ensembles = _ensembles(destination, top_dirs)
    if len(ensembles) != 1:
        what = "none is an ensemble" if not ensembles else f"{len(ensembles)} are ensembles"
        raise ModelArchiveError(
            f"the model archive holds {len(top_dirs)} model directories ({', '.join(top_dirs)}) and {what}: "
            "it must hold one model directory, or one ensemble with the models it uses"
        )
    rest = tuple(d for d in top_dirs if d != ensembles[0])
    return ExtractedModel(destination, (ensembles[0], *rest), size)


def _no_filter() -> dict[str, Any]:
    # The members were checked and filtered already; passing filter= also silences 3.12+'s warning.
    return {"filter": "fully_trusted"} if hasattr(tarfile, "data_filter") else {}


def directory_size(path: str | Path) -> int:
    """Total bytes of the regular files under ``path`` (links are not followed)."""
    total = 0
    for item in Path(path).rglob("*"):
        with contextlib.suppress(OSError):
            if item.is_file() and not item.is_symlink():
                total += item.stat().st_size
    return total


def target_model_hash(target_model: str) -> str:
    """The name a TargetModel is loaded under: the MD5 hex digest of the name, as SageMaker's platform
    names ``/opt/ml/models/<hash>``.

    Example:
        >>> target_model_hash("linear.tar.gz") == hashlib.md5(b"linear.tar.gz").hexdigest()
        True
    """
    return hashlib.md5(target_model.encode("utf-8"), usedforsecurity=False).hexdigest()


# ------------------------------------------------------------------------------------------------ LRU


class ModelLRU:
    """Least-recently-used bookkeeping of loaded models under a byte budget and/or a model count.

    Not thread-safe by itself: :class:`InvocationRuntime` calls it under its own lock.

    Parameters:
        budget_bytes: the sum of sizes above which the least recently used are evicted; ``None``: no limit.
        max_models: the number of models above which they are evicted; ``None``: no limit.

    Example:
        >>> lru = ModelLRU(budget_bytes=100)
        >>> lru.add("a", 60), lru.add("b", 30), lru.touch("a"), lru.add("c", 30)
        ([], [], True, ['b'])
    """

    def __init__(
        self, *, budget_bytes: int | None = DEFAULT_MEMORY_BUDGET, max_models: int | None = None
    ) -> None:
        if budget_bytes is not None and budget_bytes <= 0:
            raise ValueError("budget_bytes must be > 0 (or None for no limit)")
        if max_models is not None and max_models <= 0:
            raise ValueError("max_models must be > 0 (or None for no limit)")
        self.budget_bytes = budget_bytes
        self.max_models = max_models
        self._sizes: OrderedDict[str, int] = OrderedDict()

    def __contains__(self, name: object) -> bool:
        return name in self._sizes

    def __len__(self) -> int:
        return len(self._sizes)

    @property
    def total_bytes(self) -> int:
        """The sum of the sizes of the models held."""
        return sum(self._sizes.values())

    def names(self) -> list[str]:
        """The models held, least recently used first."""
        return list(self._sizes)

    def touch(self, name: str) -> bool:
        """Mark ``name`` as just used; ``False`` when it is not held."""
        if name not in self._sizes:
            return False
        self._sizes.move_to_end(name)
        return True

    def add(self, name: str, size: int) -> list[str]:
        """Hold ``name`` (most recently used) and return the models evicted to make room, oldest first.

        The model just added is never evicted, even when it alone is over the budget.
        """
        if size < 0:
            raise ValueError("size must be >= 0")
        self._sizes[name] = size
        self._sizes.move_to_end(name)
        evicted: list[str] = []
        while len(self._sizes) > 1 and self._over():
            oldest = next(iter(self._sizes))
            del self._sizes[oldest]
            evicted.append(oldest)
        return evicted

    def remove(self, name: str) -> bool:
        """Forget ``name``; ``False`` when it was not held."""
        return self._sizes.pop(name, None) is not None

    def clear(self, *, keep: str | None = None) -> list[str]:
        """Forget every model except ``keep``; return those forgotten, oldest first."""
        gone = [n for n in self._sizes if n != keep]
        for name in gone:
            del self._sizes[name]
        return gone

    def _over(self) -> bool:
        if self.max_models is not None and len(self._sizes) > self.max_models:
            return True
        return self.budget_bytes is not None and self.total_bytes > self.budget_bytes


# ------------------------------------------------------------------------------------------- runtime


class _Triton(Protocol):
    """What the runtime needs of a :class:`~mme_triton.local.triton.TritonServer`."""

    def start(self) -> None: ...
    def stop(self, timeout: float = ...) -> None: ...
    def load(self, model_hash: str, model_dir: Path, target_model: str, *, timeout: float = ...) -> None: ...
    def unload(self, model_hash: str, *, target_model: str | None = ..., timeout: float = ...) -> None: ...
    def invoke(
        self, model_hash: str, target_model: str, body: bytes, content_type: str, *, timeout: float = ...
    ) -> tuple[int, dict[str, str], bytes]: ...


TritonFactory = Callable[[str, Mapping[str, str], Path], _Triton]
"""(endpoint name, the model's Environment, a scratch directory) -> an unstarted Triton server."""


def _split_s3_url(url: str) -> tuple[str, str]:
    if not url.startswith("s3://"):
        raise ValueError(f"ModelDataUrl must be an s3:// URL, got {url!r}")
    bucket, _, key = url[5:].partition("/")
    if not bucket:
        raise ValueError(f"ModelDataUrl has no bucket: {url!r}")
    return bucket, key


@dataclass
class EndpointModels:
    """What an in-service endpoint serves: resolved once from Endpoint -> EndpointConfig -> Model."""

    endpoint_name: str
    model_data_url: str
    environment: dict[str, str] = field(default_factory=dict)
    variant_name: str = "AllTraffic"
    mode: str = "MultiModel"


class EndpointRuntime:
    """One in-service endpoint: its Triton, its loaded models and their LRU.

    Created by :class:`InvocationRuntime` when the endpoint goes in service; :meth:`invoke` answers one
    InvokeEndpoint request.
    """

    def __init__(
        self,
        models: EndpointModels,
        *,
        triton: _Triton,
        s3_client: S3Client,
        workdir: Path,
        lru: ModelLRU,
        region: str,
        account_id: str,
        adapt: Callable[[Path], list[str]] | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        load_timeout: float = 360.0,
        unload_timeout: float = 60.0,
        invoke_timeout: float = 60.0,
    ) -> None:
        self.models = models
        self.triton = triton
        self._s3 = s3_client
        self._workdir = workdir
        self._lru = lru
        self._region = region
        self._account_id = account_id
        self._adapt = adapt
        self._ready_timeout = ready_timeout
        self._load_timeout = load_timeout
        self._unload_timeout = unload_timeout
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight: Counter[str] = Counter()
        self._loading: dict[str, Future[None]] = {}
        self._unloading: dict[str, Future[None]] = {}
        self._connections: queue.LifoQueue[http.client.HTTPConnection] = queue.LifoQueue()
        self._invoke_timeout = invoke_timeout
        self._loader = ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"load-{models.endpoint_name}")
        self._unloader = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"unload-{models.endpoint_name}"
        )
        self.loads = 0
        """How many model loads this endpoint performed (a reload after eviction counts again)."""

    @property
    def endpoint_name(self) -> str:
        """The endpoint's name."""
        return self.models.endpoint_name

    @property
    def workdir(self) -> Path:
        """This endpoint's scratch directory; extracted models are under ``models/<hash>/model``."""
        return self._workdir

    def loaded_models(self) -> list[str]:
        """The TargetModels currently loaded, least recently used first."""
        with self._lock:
            return self._lru.names()

    def wait_for_unloads(self, timeout: float | None = None) -> None:
        """Block until the unloads scheduled so far have finished."""
        with self._lock:
            pending = list(self._unloading.values())
        for future in pending:
            with contextlib.suppress(Exception):
                future.result(timeout=timeout)

    def close(self, *, drain_timeout: float = 0.0) -> None:
        """Stop scheduling unloads, stop this endpoint's Triton and remove its extracted models.

        Parameters:
            drain_timeout: seconds to wait first for the requests being forwarded to finish.
        """
        if drain_timeout > 0:
            with self._idle:
                self._idle.wait_for(lambda: not self._in_flight, timeout=drain_timeout)
        self._loader.shutdown(wait=False, cancel_futures=True)
        self._unloader.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(queue.Empty):
            while True:
                self._connections.get_nowait().close()
        self.triton.stop()
        shutil.rmtree(self._workdir, ignore_errors=True)

    # -- the request path --------------------------------------------------------------------------

    def invoke(self, target_model: str, body: bytes, content_type: str) -> RuntimeResponse:
        """Answer one InvokeEndpoint request for ``target_model`` (loading it first if needed)."""
        try:
            model_hash = self._acquire(target_model)
        except ModelDataNotFoundError as exc:
            return model_data_not_found(exc.bucket, exc.key)
        except ModelArchiveError as exc:
            bucket, key = self._location(target_model)
            return validation_error(f"Failed to extract model data(bucket: {bucket}, key: {key}): {exc}")
        except _NotReady:
            return model_not_ready(target_model, self._ready_timeout)
        except _LoadFailed as exc:
            return self._model_error(exc.status, exc.body)
        except LocalStackError as exc:
            logger.error("endpoint %s: %s", self.endpoint_name, exc)
            return internal_failure(str(exc))
        try:
            status, headers, answer = self._forward(model_hash, target_model, body, content_type)
        except LocalStackError as exc:
            logger.error("endpoint %s: %s", self.endpoint_name, exc)
            return internal_failure(str(exc))
        finally:
            self._release(target_model)
        if 200 <= status < 300:
            response_type = headers.get("content-type", "application/octet-stream")
            return RuntimeResponse(
                200,
                [
                    ("Content-Type", response_type),
                    ("x-Amzn-Invoked-Production-Variant", self.models.variant_name),
                    ("x-amzn-RequestId", _request_id()),
                    ("Content-Length", str(len(answer))),
                ],
                answer,
            )
        return self._model_error(status, answer)

    def _forward(
        self, model_hash: str, target_model: str, body: bytes, content_type: str
    ) -> tuple[int, dict[str, str], bytes]:
        """``POST /models/<hash>/invoke`` over a pooled keep-alive connection.

        The WSGI server runs every request on a new thread, so a per-thread connection would be a new
        TCP connection per request; the pool keeps a few open across requests.
        """
        port = getattr(self.triton, "port", None)
        if not isinstance(port, int):
            return self.triton.invoke(model_hash, target_model, body, content_type)
        headers = {TARGET_MODEL_HEADER: target_model, "Content-Type": content_type}
        path = f"/models/{model_hash}/invoke"
        for attempt in range(2):
            try:
                conn = self._connections.get_nowait()
                reused = True
            except queue.Empty:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=self._invoke_timeout)
                reused = False
            try:
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                answer = response.read()
            except (http.client.HTTPException, OSError) as exc:
                conn.close()
                if reused and attempt == 0:
                    continue  # Triton closed an idle connection: one fresh try
                message = f"POST {path} to the endpoint's Triton failed: {exc}"
                if getattr(self.triton, "returncode", None) is not None:
                    tail = getattr(self.triton, "log_tail", lambda: "")()
                    message = f"the endpoint's Triton exited ({message}); its log ends with:\n{tail}"
                raise LocalStackError(message) from exc
            if response.will_close:
                conn.close()
            else:
                self._connections.put(conn)
            return response.status, {k.lower(): v for k, v in response.getheaders()}, answer
        raise AssertionError("unreachable")

    def _model_error(self, status: int, body: bytes) -> RuntimeResponse:
        return model_error(
            status, body, endpoint_name=self.endpoint_name, region=self._region, account_id=self._account_id
        )

    def _location(self, target_model: str) -> tuple[str, str]:
        bucket, prefix = _split_s3_url(self.models.model_data_url)
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        return bucket, prefix + target_model

    def _acquire(self, target_model: str) -> str:
        """Make sure ``target_model`` is loaded and count one request on it; return its hash.

        The download and load run on the endpoint's loader threads; concurrent first requests share one.
        A request waits for it at most ``ready_timeout`` seconds, then gets ``ModelNotReadyException``
        while the load goes on, as SageMaker answers within 60 s and keeps loading for up to 360 s.
        """
        model_hash = target_model_hash(target_model)
        deadline = time.monotonic() + self._ready_timeout
        while True:
            with self._lock:
                if self._lru.touch(target_model):
                    self._in_flight[target_model] += 1
                    return model_hash
                pending = self._loading.get(target_model)
                if pending is None:
                    pending = self._loader.submit(self._load_and_hold, target_model, model_hash)
                    self._loading[target_model] = pending
            try:
                # the load's failure is this request's failure too
                pending.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeoutError:
                raise _NotReady(target_model) from None
            # loaded now: take it through the LRU (a concurrent load may have evicted it already)

    def _load_and_hold(self, target_model: str, model_hash: str) -> None:
        """Wait for a pending unload of the model, load it and put it in the LRU (on a loader thread)."""
        try:
            with self._lock:
                unloading = self._unloading.get(target_model)
            if unloading is not None:
                with contextlib.suppress(Exception):
                    unloading.result(timeout=self._unload_timeout + 5)
            size = self._load(target_model, model_hash)
        except BaseException:
            with self._lock:
                self._loading.pop(target_model, None)
            raise
        with self._lock:
            self._loading.pop(target_model, None)
            evicted = self._lru.add(target_model, size)
            for victim in evicted:
                self._schedule_unload(victim)
        if evicted:
            logger.info(
                "endpoint %s: unloading %s to stay within the memory budget",
                self.endpoint_name,
                ", ".join(evicted),
            )

    def _release(self, target_model: str) -> None:
        with self._lock:
            self._in_flight[target_model] -= 1
            if self._in_flight[target_model] <= 0:
                del self._in_flight[target_model]
                self._idle.notify_all()

    def _model_root(self, model_hash: str) -> Path:
        return self._workdir / "models" / model_hash

    def _load(self, target_model: str, model_hash: str) -> int:
        """Download, extract, adapt and load ``target_model``; return the on-disk size of what it loaded."""
        root = self._model_root(model_hash)
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        try:
            archive = root / "archive"
            self._download(target_model, archive)
            extracted = safe_extract(archive, root / "model")
            archive.unlink()
            if self._adapt is not None:
                changes = self._adapt(extracted.path)
                if changes:
                    logger.warning(
                        "endpoint %s: %s targets a GPU; serving an adapted copy on the CPU: %s",
                        self.endpoint_name,
                        target_model,
                        "; ".join(changes),
                    )
            self._triton_load(model_hash, extracted.path, target_model)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        with self._lock:
            self.loads += 1
        return directory_size(extracted.path)  # after adaptation: the bytes Triton actually loaded

    def _triton_load(self, model_hash: str, path: Path, target_model: str) -> None:
        from mme_triton.local.triton import TritonLoadError

        try:
            self.triton.load(model_hash, path, target_model, timeout=self._load_timeout)
            return
        except TritonLoadError as exc:
            if exc.status != 507:
                raise _LoadFailed(exc.status, exc.message) from exc
            first = exc
        # 507: Triton is out of memory. Like SageMaker, unload the other models and try once more.
        logger.warning(
            "endpoint %s: out of memory loading %s; unloading the others", self.endpoint_name, target_model
        )
        with self._lock:
            for victim in self._lru.clear():
                self._schedule_unload(victim)
        self.wait_for_unloads(timeout=self._unload_timeout + 5)
        try:
            self.triton.load(model_hash, path, target_model, timeout=self._load_timeout)
        except TritonLoadError as exc:
            raise _LoadFailed(exc.status, exc.message) from first

    def _download(self, target_model: str, destination: Path) -> None:
        from botocore.exceptions import ClientError

        bucket, key = self._location(target_model)
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "NoSuchBucket", "404", "403", "AccessDenied"):
                raise ModelDataNotFoundError(bucket, key) from exc
            raise LocalStackError(f"cannot download s3://{bucket}/{key}: {exc}") from exc
        stream = response["Body"]
        try:
            with destination.open("wb") as out:
                for chunk in iter(lambda: stream.read(_COPY_CHUNK), b""):
                    out.write(chunk)
        finally:
            stream.close()

    def _schedule_unload(self, target_model: str) -> None:
        """Queue the unload of an evicted model (caller holds the lock)."""
        self._unloading[target_model] = future = self._unloader.submit(self._unload, target_model)

        def forget(done: Future[None]) -> None:
            with self._lock:
                if self._unloading.get(target_model) is done:
                    del self._unloading[target_model]

        future.add_done_callback(forget)

    def _unload(self, target_model: str) -> None:
        model_hash = target_model_hash(target_model)
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight[target_model] <= 0, timeout=self._unload_timeout)
        try:
            self.triton.unload(model_hash, target_model=target_model, timeout=self._unload_timeout)
            logger.info("endpoint %s: unloaded %s", self.endpoint_name, target_model)
        except LocalStackError as exc:
            logger.warning("endpoint %s: unloading %s failed: %s", self.endpoint_name, target_model, exc)
        finally:
            shutil.rmtree(self._model_root(model_hash), ignore_errors=True)


class _NotReady(Exception):
    """The model's download and load took longer than a request waits for it."""


class _LoadFailed(Exception):
    """Triton refused to load a model (or the stack cannot run it); answered as a ModelError."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.body = json.dumps({"error": message}).encode()
        super().__init__(message)


def _gpu_adapter() -> Callable[[Path], list[str]]:
    from mme_triton.local.adapt import GPUModelError, adapt_for_cpu

    def adapt(model_dir: Path) -> list[str]:
        try:
            return list(adapt_for_cpu(model_dir))
        except GPUModelError as exc:
            raise _LoadFailed(400, str(exc)) from exc

    return adapt


# Arguments that would bind fixed ports (two stacks could not run side by side) stay the stack's choice.
_PORT_ARGS = ("--allow-grpc", "--grpc-port", "--allow-metrics", "--metrics-port")


def local_serve_args(environment: Mapping[str, str]) -> list[str]:
    """The serve script's ``tritonserver`` arguments for ``environment``, as the embedded stack uses them.

    Everything :func:`~mme_triton.endpoint.environment.serve_args` derives is kept (python-backend shared
    memory, thread counts, log levels ...) except the gRPC and metrics endpoints, which would bind fixed
    ports, and the serve script's default verbose logging: ``--log-verbose`` is kept only when the
    Environment sets ``SAGEMAKER_TRITON_LOG_VERBOSE`` (otherwise the stack's ``log_verbose`` applies).
    """
    from mme_triton.endpoint.environment import LOG_VERBOSE, serve_args

    args = serve_args(environment)
    kept = []
    for arg in args:
        option = arg.split("=", 1)[0]
        if option in _PORT_ARGS or (option == "--log-verbose" and LOG_VERBOSE not in environment):
            continue
        kept.append(arg)
    return kept


def _default_triton_factory(*, log_verbose: int = 0, startup_timeout: float = 60.0) -> TritonFactory:
    def factory(endpoint_name: str, environment: Mapping[str, str], workdir: Path) -> _Triton:
        from mme_triton.local.triton import TritonServer

        try:
            extra_args = local_serve_args(environment)
        except ValueError as exc:
            raise LocalStackError(f"the model's Environment is not valid: {exc}") from exc
        return TritonServer(
            workdir=workdir,
            extra_args=extra_args,
            log_verbose=log_verbose,
            startup_timeout=startup_timeout,
        )

    return factory


class InvocationRuntime:
    """SageMaker's runtime for the embedded stack: the InvokeEndpoint route and one Triton per endpoint.

    Wire it into the control plane: pass :meth:`middleware` as its ``wsgi_middleware``, append
    :meth:`on_in_service` and :meth:`on_deleted` to its hooks, and call :meth:`bind` with a boto3 session
    pointing at it once it runs. :class:`~mme_triton.local.stack.LocalStack` does all of that.

    Parameters:
        workdir: scratch space; one sub-directory per endpoint (Triton's files and extracted models).
        region: the region in the answers (log group ARNs, console links).
        account_id: the account in the answers (``Endpoint X of account Y not found.``).
        memory_budget: bytes of extracted model files loaded per endpoint before the least recently used
            are unloaded; ``None`` for no byte limit.
        max_models: models loaded per endpoint before the least recently used are unloaded; ``None``
            for no count limit.
        triton_factory: builds the (unstarted) Triton server of an endpoint; default
            :class:`~mme_triton.local.triton.TritonServer` with ``serve_args(Environment)``.
        adapt_gpu_configs: run :func:`~mme_triton.local.adapt.adapt_for_cpu` on every extracted model.
        max_payload_bytes: the request-body limit (InvokeEndpoint's 6 MiB).
        log_verbose: Triton's ``--log-verbose`` level for the default factory's servers.
        ready_timeout: seconds a request waits for its model's download and load; after that it is
            answered ``ModelNotReadyException`` while the load goes on (SageMaker: 60 s).

    Example:
        >>> runtime = InvocationRuntime(workdir=Path("/tmp/rt"))  # doctest: +SKIP
        >>> control_plane = ControlPlane(wsgi_middleware=runtime.middleware)  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        workdir: Path,
        region: str = "us-east-1",
        account_id: str = "123456789012",
        memory_budget: int | None = DEFAULT_MEMORY_BUDGET,
        max_models: int | None = None,
        triton_factory: TritonFactory | None = None,
        adapt_gpu_configs: bool = True,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        log_verbose: int = 0,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
    ) -> None:
        ModelLRU(budget_bytes=memory_budget, max_models=max_models)  # validates both
        if ready_timeout <= 0:
            raise ValueError("ready_timeout must be > 0 seconds")
        self.workdir = Path(workdir)
        self.region = region
        self.account_id = account_id
        self.memory_budget = memory_budget
        self.max_models = max_models
        self.max_payload_bytes = max_payload_bytes
        self.ready_timeout = ready_timeout
        self._triton_factory = triton_factory or _default_triton_factory(log_verbose=log_verbose)
        self._adapt_gpu_configs = adapt_gpu_configs
        self._endpoints: dict[str, EndpointRuntime] = {}
        self._lock = threading.Lock()
        self._session: Any = None
        self._s3: S3Client | None = None
        self._sagemaker: SageMakerClient | None = None
        self._generation = 0
        self._stopping = threading.Event()

    # -- wiring ------------------------------------------------------------------------------------

    def bind(self, boto3_session: Any, *, endpoint_url: str | None = None) -> None:
        """Give the runtime the boto3 session (pointing at the control plane) to read S3 and SageMaker."""
        from botocore.config import Config

        config = Config(retries={"max_attempts": 2, "mode": "standard"}, max_pool_connections=32)
        extra = {"endpoint_url": endpoint_url} if endpoint_url else {}
        self._session = boto3_session
        self._s3 = boto3_session.client("s3", config=config, **extra)
        self._sagemaker = boto3_session.client("sagemaker", config=config, **extra)

    def endpoint(self, endpoint_name: str) -> EndpointRuntime | None:
        """The runtime of an in-service endpoint, ``None`` when there is none."""
        with self._lock:
            return self._endpoints.get(endpoint_name)

    def endpoints(self) -> list[str]:
        """Names of the endpoints with a running Triton."""
        with self._lock:
            return sorted(self._endpoints)

    # -- control-plane hooks -----------------------------------------------------------------------

    def on_in_service(self, endpoint_name: str, description: Mapping[str, Any]) -> None:
        """Start the endpoint's Triton (replacing the previous one after an update).

        Raising makes the control plane mark the endpoint ``Failed`` with the message as FailureReason.
        """
        if self._stopping.is_set():
            raise LocalStackError("the embedded stack is stopping")
        models = self._resolve(endpoint_name, description)
        if models.mode != "MultiModel":
            logger.warning(
                "endpoint %s serves a single-model container (Mode %s); the embedded stack serves "
                "multi-model endpoints only and will refuse its InvokeEndpoint calls",
                endpoint_name,
                models.mode,
            )
        with self._lock:
            self._generation += 1
            workdir = self.workdir / f"{_safe_name(endpoint_name)}-{self._generation}"
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            triton = self._triton_factory(endpoint_name, models.environment, workdir / "triton")
            triton.start()
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        if self._s3 is None:
            triton.stop()
            raise LocalStackError("the runtime has no S3 client: call bind() first")
        runtime = EndpointRuntime(
            models,
            triton=triton,
            s3_client=self._s3,
            workdir=workdir,
            lru=ModelLRU(budget_bytes=self.memory_budget, max_models=self.max_models),
            region=self.region,
            account_id=self.account_id,
            adapt=_gpu_adapter() if self._adapt_gpu_configs else None,
            ready_timeout=self.ready_timeout,
        )
        with self._lock:
            closed = self._stopping.is_set()
            previous = None if closed else self._endpoints.get(endpoint_name)
            if not closed:
                self._endpoints[endpoint_name] = runtime
        if closed:  # the stack stopped while this Triton was starting
            runtime.close()
            raise LocalStackError("the embedded stack is stopping")
        logger.info(
            "endpoint %s in service: Triton at %s serving %s",
            endpoint_name,
            getattr(triton, "url", "?"),
            models.model_data_url,
        )
        if previous is not None:
            # new requests go to the new server; those still on the old one finish before it stops
            threading.Thread(
                target=previous.close,
                kwargs={"drain_timeout": 60.0},
                name=f"retire-{endpoint_name}",
                daemon=True,
            ).start()

    def on_deleted(self, endpoint_name: str) -> None:
        """Stop the endpoint's Triton and forget its models."""
        with self._lock:
            runtime = self._endpoints.pop(endpoint_name, None)
        if runtime is not None:
            runtime.close()
            logger.info("endpoint %s deleted: its Triton stopped", endpoint_name)

    def stop(self) -> None:
        """Stop every endpoint's Triton."""
        self._stopping.set()
        with self._lock:
            runtimes = list(self._endpoints.values())
            self._endpoints.clear()

        def close(runtime: EndpointRuntime) -> None:
            try:
                runtime.close()
            except Exception:  # keep stopping the others
                logger.exception("stopping the Triton of endpoint %s failed", runtime.endpoint_name)

        # each Triton takes seconds to shut down: stop them side by side
        stoppers = [
            threading.Thread(target=close, args=(r,), name=f"stop-{r.endpoint_name}") for r in runtimes
        ]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join()

    def _resolve(self, endpoint_name: str, description: Mapping[str, Any]) -> EndpointModels:
        """Endpoint -> EndpointConfig -> Model: the ModelDataUrl, Environment and variant it serves.

        The control plane's hook description carries the config and the model; without them they are
        read with DescribeEndpointConfig and DescribeModel.
        """
        config_name = description.get("EndpointConfigName")
        if not config_name:
            raise LocalStackError(f"endpoint {endpoint_name} has no EndpointConfigName")
        config: Mapping[str, Any] | None = description.get("EndpointConfig")
        if config is None:
            if self._sagemaker is None:
                raise LocalStackError("the runtime has no SageMaker client: call bind() first")
            config = self._sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
        variants = config.get("ProductionVariants") or []
        if not variants:
            raise LocalStackError(f"endpoint config {config_name} has no production variant")
        variant = variants[0]
        model: Mapping[str, Any] | None = (description.get("Models") or {}).get(variant["ModelName"])
        if model is None:
            if self._sagemaker is None:
                raise LocalStackError("the runtime has no SageMaker client: call bind() first")
            model = self._sagemaker.describe_model(ModelName=variant["ModelName"])
        container: Mapping[str, Any] = model.get("PrimaryContainer") or (model.get("Containers") or [{}])[0]
        url = container.get("ModelDataUrl")
        if not url:
            raise LocalStackError(f"model {variant['ModelName']} has no ModelDataUrl")
        _split_s3_url(url)
        return EndpointModels(
            endpoint_name=endpoint_name,
            model_data_url=url,
            environment=dict(container.get("Environment") or {}),
            variant_name=variant.get("VariantName", "AllTraffic"),
            mode=str(container.get("Mode", "MultiModel")),
        )

    # -- the HTTP route ----------------------------------------------------------------------------

    def handle(
        self, endpoint_name: str, target_model: str | None, body: bytes | None, content_type: str, length: int
    ) -> RuntimeResponse:
        """Answer one InvokeEndpoint request (``body`` ``None`` when ``length`` was over the limit)."""
        if body is None or length > self.max_payload_bytes:
            return payload_too_large(self.max_payload_bytes)
        runtime = self.endpoint(endpoint_name)
        if runtime is None:
            return endpoint_not_found(endpoint_name, self.account_id)
        if runtime.models.mode != "MultiModel":
            if target_model:
                return validation_error(
                    f"Endpoint {endpoint_name} is not a multi-model endpoint and does not support target "
                    "model header."
                )
            return internal_failure(
                f"endpoint {endpoint_name} is a single-model endpoint; the embedded stack serves multi-model "
                "endpoints only"
            )
        if not target_model:
            return validation_error(
                f"Request {_request_id()} is missing a target model header, which is required for "
                f"multi-model endpoint {endpoint_name}."
            )
        if len(target_model) > _MAX_TARGET_MODEL or not _PRINTABLE.match(target_model):
            return validation_error(
                "1 validation error detected: Value at 'targetModel' failed to satisfy constraint: Member "
                f"must have length less than or equal to {_MAX_TARGET_MODEL} and consist of printable "
                "characters"
            )
        return runtime.invoke(target_model, body, content_type or "application/octet-stream")

    def middleware(self, app: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a WSGI app: answer ``POST /endpoints/<name>/invocations``, pass everything else to ``app``."""

        def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            match = _INVOCATIONS.match(environ.get("PATH_INFO", ""))
            if match is None or environ.get("REQUEST_METHOD") != "POST":
                return app(environ, start_response)  # type: ignore[no-any-return]
            response = self._handle_wsgi(unquote(match.group("name")), environ)
            start_response(response.status_line, response.headers)
            return [response.body]

        return wsgi

    def _handle_wsgi(self, endpoint_name: str, environ: Mapping[str, Any]) -> RuntimeResponse:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body: bytes | None = None
        if length <= self.max_payload_bytes:
            body = _read_body(environ["wsgi.input"], length)
            length = len(body)
        else:
            _drain(environ["wsgi.input"], length)  # an unread body would reset the client's connection
        try:
            return self.handle(
                endpoint_name,
                environ.get("HTTP_X_AMZN_SAGEMAKER_TARGET_MODEL"),
                body,
                environ.get("CONTENT_TYPE", ""),
                length,
            )
        except Exception as exc:  # the WSGI server must get an answer, and the caller a real error
            logger.exception("InvokeEndpoint for %s failed", endpoint_name)
            return internal_failure(f"{type(exc).__name__}: {exc}")


def _read_body(stream: IO[bytes], length: int) -> bytes:
    chunks: list[bytes] = []
    remaining = length
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _drain(stream: IO[bytes], length: int) -> None:
    remaining = length
    while remaining > 0:
        chunk = stream.read(min(remaining, _COPY_CHUNK))
        if not chunk:
            return
        remaining -= len(chunk)


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64] or "endpoint"
