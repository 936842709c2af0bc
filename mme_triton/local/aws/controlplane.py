"""moto's server on 127.0.0.1, with the SageMaker behaviour moto lacks added on top of it.

moto (``moto[server]``) answers S3, SageMaker, Application Auto Scaling, STS, CloudWatch ... but its
SageMaker backend stops short of what a deployment needs. :class:`ControlPlane` runs moto's real WSGI
application and patches moto's SageMaker backend and response classes at runtime (nothing is mocked
away; every call still goes through moto's HTTP server and moto's backends):

- ``CreateEndpoint`` leaves the endpoint ``Creating``; a background thread moves it to ``InService`` (or
  ``Failed``) after ``transition_delay`` seconds, running the ``on_in_service`` hooks first;
- ``UpdateEndpoint`` (moto has none): ``Updating`` → ``InService`` on the new endpoint config. When the
  update fails, the endpoint stays ``InService`` on its previous config and ``FailureReason`` says why,
  as SageMaker does;
- ``UpdateEndpointWeightsAndCapacities``: ``Updating`` → ``InService`` with the new instance count, once
  the ``on_instance_count`` hooks have run (the count stays as it was, with a ``FailureReason``, when one
  fails); Application Auto Scaling's ``RegisterScalableTarget`` brings a variant's count within the
  target's ``[MinCapacity, MaxCapacity]`` through it, as AWS does;
- ``DeleteEndpoint`` runs the ``on_deleted`` hooks;
- every ``ml.<family>.<size>`` instance type is accepted (moto's list stops at ``ml.g4dn``/``ml.p3``;
  the library checks instance types against its own table before calling);
- ``ListTags``/``AddTags``/``DeleteTags`` on the ARN of a resource that no longer exists answer
  ``ValidationException``, as SageMaker does (moto fails with an internal error);
- every SageMaker and Application Auto Scaling answer takes the shape of the API
  (:mod:`._shapes`): an unset structure, list or map is left out, not written empty, so typed clients
  such as the SageMaker SDK's resource classes parse it; a scalable target of a SageMaker variant has the
  ``RoleARN`` (the service-linked role) and ``SuspendedState`` that Application Auto Scaling reports, and
  an endpoint with data capture reports DescribeEndpoint's summary of it, not the config's.
- inference components (:mod:`._components`, :mod:`._component_api`): the six operations, endpoint configs
  without ``ModelName``, copies placed on the endpoint's instances (``on_component`` hooks start them),
  Application Auto Scaling's ``inference-component/<name>`` targets (:mod:`._component_scaling`; the
  stack's :mod:`.autoscaling` evaluates the policies);
- CloudWatch's PutMetricData, ListMetrics, GetMetricData and GetMetricStatistics are answered as
  CloudWatch answers them (:mod:`mme_triton.local.aws.cloudwatch`; moto's own answers ignore namespaces,
  match subsets of dimensions, list metrics many times and fail on percentiles).

Isolation: moto keeps state in process-global backends keyed by account id. Each ControlPlane assumes a
role in an account id of its own (through moto's STS, whose temporary keys moto maps back to that
account), so two ControlPlanes in one process do not see each other's resources. The patches themselves
are process-wide but inert for accounts that no ControlPlane owns: there moto behaves as shipped, except
that the wider instance-type check, the tag calls' ``ValidationException``, the scalable targets'
``RoleARN`` and ``SuspendedState``, the data capture summary and ``UpdateEndpoint`` (switching at once) are
available too.

Example::

    with ControlPlane(transition_delay=0.2) as plane:
        sagemaker = plane.boto3_session().client("sagemaker")
        ...
"""

from __future__ import annotations

import itertools
import json
import logging
import secrets
import threading
from collections.abc import Callable, Hashable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config

from mme_triton._sagemaker import endpoint_session, new_boto3_session
from mme_triton.local.aws._moto_patches import (
    apply_capacities,
    describe_for_hooks,
    install_patches,
    register,
    switch_config,
    unregister,
    utcnow,
)
from mme_triton.local.aws._shapes import conform_answers

__all__ = [
    "ComponentHook",
    "ControlPlane",
    "DeletedHook",
    "InServiceHook",
    "InstanceCountHook",
    "WSGIApplication",
]

logger = logging.getLogger(__name__)

WSGIApplication = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
InServiceHook = Callable[[str, dict[str, Any]], None]
DeletedHook = Callable[[str], None]
InstanceCountHook = Callable[[str, str, int], None]
ComponentHook = Callable[[str, dict[str, Any]], None]


class ControlPlane:
    """moto's server on 127.0.0.1 with the SageMaker behaviour moto lacks.

    Parameters:
        region: the region of the sessions :meth:`boto3_session` hands out.
        transition_delay: seconds an endpoint stays ``Creating``/``Updating`` before its hooks run and it
            becomes ``InService`` (or ``Failed``).
        wsgi_middleware: wraps moto's whole WSGI application (e.g. to answer ``InvokeEndpoint`` in front
            of moto's canned route); it receives moto's app and returns the app to serve.

    Attributes:
        url: ``http://127.0.0.1:<port>`` once started.
        service_urls: boto3 service name -> the URL the sessions' clients of that service use instead
            of ``url`` (the stack serves ``sagemaker-runtime`` on a port of its own).
        account_id: the account this plane's credentials map to in moto.
        on_in_service: ``hook(endpoint_name, description)`` called before an endpoint becomes
            ``InService`` after a create or an update. ``description`` is a DescribeEndpoint-like dict for
            the config being brought into service: ``ProductionVariants`` (config variants merged with
            the endpoint's counts), ``EndpointConfigName``, ``EndpointConfig``, ``Models`` (name →
            DescribeModel) and ``Model`` (the first variant's model). If a hook raises, a create goes to
            ``Failed`` and an update is rolled back; either way ``FailureReason`` is ``str(exc)``.
        on_instance_count: ``hook(endpoint_name, variant_name, count)`` called before an endpoint becomes
            ``InService`` again after ``UpdateEndpointWeightsAndCapacities`` changed a variant's
            ``DesiredInstanceCount``. If a hook raises, the counts stay as they were and ``FailureReason``
            is ``str(exc)``.
        on_deleted: ``hook(endpoint_name)`` called in the DeleteEndpoint request (after the endpoint is
            gone); exceptions are logged, not returned to the caller.
        on_component: ``hook(component_name, plan)`` called in each transition of an inference component
            (:mod:`._components`), before it becomes current: ``plan["Copies"]`` are the copies that must
            run then (``CopyId``, ``InstanceId``), ``plan["Container"]`` what each serves (``Image``,
            ``ModelDataUrl``, ``Environment``); ``plan["Deleted"]`` when the component is deleted. If a hook
            raises, a create goes to ``Failed`` and an update is rolled back (the hooks run again with the
            copies that stay); ``FailureReason`` is ``str(exc)``.

    Raises:
        LocalStackError: from :meth:`start`, when moto's server cannot start.

    Example::

        with ControlPlane() as plane:
            sm = plane.boto3_session().client("sagemaker")
            sm.list_endpoints()
    """

    def __init__(
        self,
        *,
        region: str = "us-east-1",
        transition_delay: float = 0.0,
        wsgi_middleware: Callable[[WSGIApplication], WSGIApplication] | None = None,
    ) -> None:
        if transition_delay < 0:
            raise ValueError(f"transition_delay must be >= 0, got {transition_delay}")
        self.region = region
        self.transition_delay = float(transition_delay)
        self.wsgi_middleware = wsgi_middleware
        self.on_in_service: list[InServiceHook] = []
        self.on_instance_count: list[InstanceCountHook] = []
        self.service_urls: dict[str, str] = {}
        self.on_deleted: list[DeletedHook] = []
        self.on_component: list[ComponentHook] = []
        self.url = ""
        self.account_id = ""
        self._credentials: dict[str, str] = {}
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._generation = itertools.count(1)
        self._current: dict[Hashable, int] = {}  # endpoint name (or key) -> its pending transition
        self._timers: set[threading.Timer] = set()
        self._failures: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start moto's server on 127.0.0.1 (a free port) and take an account of this plane's own."""
        if self._server is not None:
            return
        from mme_triton.errors import LocalStackError

        try:
            from moto.moto_server.werkzeug_app import (
                DomainDispatcherApplication,
                MotoRequestHandler,
                create_backend_app,
            )
            from werkzeug.serving import make_server
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise LocalStackError(
                "the control plane needs moto's server: pip install 'mme-triton[local]'"
            ) from exc

        class QuietRequestHandler(MotoRequestHandler):
            # werkzeug would install a stderr handler on its logger and print every request.
            def log(self, type: str, message: str, *args: Any) -> None:
                logger.debug("moto: " + message, *args)

        install_patches()
        app: Any = conform_answers(DomainDispatcherApplication(create_backend_app))
        if self.wsgi_middleware is not None:
            app = self.wsgi_middleware(app)
        try:
            server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=QuietRequestHandler)
        except OSError as exc:
            raise LocalStackError(f"cannot start moto's server on 127.0.0.1: {exc}") from exc
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_port}"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="mme-triton-moto", daemon=True
        )
        self._thread.start()
        try:
            self._take_account()
        except Exception:
            self.stop()
            raise
        logger.info("control plane on %s (account %s)", self.url, self.account_id)

    def _take_account(self) -> None:
        self.account_id = str(100_000_000_000 + secrets.randbelow(899_999_999_999))
        bootstrap = new_boto3_session(
            aws_access_key_id="mme-triton-bootstrap",
            aws_secret_access_key="mme-triton-bootstrap",
            region_name=self.region,
        ).client("sts", endpoint_url=self.url)
        answer = bootstrap.assume_role(
            RoleArn=f"arn:aws:iam::{self.account_id}:role/mme-triton-control-plane",
            RoleSessionName="mme-triton",
        )
        creds = answer["Credentials"]
        self._credentials = {
            "aws_access_key_id": creds["AccessKeyId"],
            "aws_secret_access_key": creds["SecretAccessKey"],
            "aws_session_token": creds["SessionToken"],
        }
        register(self)

    def stop(self) -> None:
        """Stop the server and the pending transitions, and drop this plane's account from moto."""
        with self._lock:
            timers = list(self._timers)
            self._timers.clear()
            self._current.clear()
        for timer in timers:
            timer.cancel()
        for timer in timers:
            if timer is not threading.current_thread():
                timer.join(timeout=30)  # a hook that is running finishes first
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None
        if self.account_id:
            unregister(self)
            self._forget_account()

    def _forget_account(self) -> None:
        """Drop this plane's account from moto's process-global backends (frees the memory it holds)."""
        try:
            from moto.backends import get_backend
            from moto.s3.models import FakeKey, s3_backends
        except ImportError:  # pragma: no cover
            return
        # S3 bucket names are one namespace across accounts: release ours, close the keys' temp files.
        if self.account_id in s3_backends:
            for backend in dict.__getitem__(s3_backends, self.account_id).values():
                for bucket in list(backend.buckets.values()):
                    for key in bucket.keys.values():
                        if isinstance(key, FakeKey):
                            key.dispose()
                    for part in bucket.multiparts.values():
                        part.dispose()
                    s3_backends.bucket_accounts.pop(bucket.name, None)
        for service in ("s3", "sagemaker", "applicationautoscaling", "cloudwatch", "sts", "iam"):
            try:
                get_backend(service).pop(self.account_id, None)
            except Exception as exc:
                logger.debug("could not drop moto state of %s: %s", service, exc)

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- clients ---------------------------------------------------------------------------------

    def boto3_session(self) -> boto3.Session:
        """A boto3 session whose clients default to this plane (credentials, region, endpoint URL).

        The process environment is not touched: other sessions keep reaching whatever they reached.
        S3 clients default to path-style addressing.
        """
        if not self.url:
            raise RuntimeError("start() the ControlPlane first")
        return endpoint_session(self.url, self.service_urls, region_name=self.region, **self._credentials)

    def client(self, service_name: str, *, config: Config | None = None) -> Any:
        """A client for ``service_name`` on this plane (shorthand for ``boto3_session().client``)."""
        session: Any = self.boto3_session()
        return session.client(service_name, config=config)

    def execution_role(self, name: str = "mme-triton-local-execution") -> str:
        """The ARN of an IAM role SageMaker may assume (``deploy_mme(role=...)``), created in this plane's
        account unless it exists."""
        iam: Any = self.client("iam")
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "sagemaker.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        try:
            role = iam.create_role(
                RoleName=name,
                AssumeRolePolicyDocument=json.dumps(trust),
                Description="Execution role of the mme_triton embedded stack",
            )
        except iam.exceptions.EntityAlreadyExistsException:
            role = iam.get_role(RoleName=name)
        return str(role["Role"]["Arn"])

    def fail_next(self, endpoint_name: str, reason: str) -> None:
        """Make the next transition of ``endpoint_name`` fail with ``FailureReason = reason``."""
        with self._lock:
            self._failures[endpoint_name] = reason

    # -- transitions (called from the patched moto backend) ---------------------------------------

    def _schedule(self, backend: Any, endpoint_name: str, endpoint_config_name: str, *, update: bool) -> None:
        self._later(
            endpoint_name,
            "transition",
            lambda generation: self._run_transition(
                backend, endpoint_name, endpoint_config_name, generation, update
            ),
        )

    def _schedule_capacities(self, backend: Any, endpoint_name: str, changes: list[dict[str, Any]]) -> None:
        self._later(
            endpoint_name,
            "capacity",
            lambda generation: self._capacities(backend, endpoint_name, changes, generation),
        )

    def _later(self, endpoint_name: str, what: str, run: Callable[[int], None]) -> None:
        """``run(generation)`` after ``transition_delay`` seconds, on a timer of its own; an endpoint's newest
        transition is the current one (``_is_current``), a deleted endpoint's none."""
        self.later(endpoint_name, what, run)

    def later(
        self, key: Hashable, what: str, run: Callable[[int], None], *, delay: float | None = None
    ) -> None:
        """``run(generation)`` after ``delay`` seconds (``transition_delay`` by default) on a timer that
        :meth:`stop` cancels; ``key`` names what it changes (an endpoint's name, or
        ``("inference-component", name)``), whose newest transition is the current one."""
        with self._lock:
            generation = next(self._generation)
            self._current[key] = generation

            def fire() -> None:
                try:
                    run(generation)
                finally:
                    with self._lock:
                        self._timers.discard(threading.current_thread())

            timer = threading.Timer(self.transition_delay if delay is None else delay, fire)
            timer.daemon = True
            timer.name = f"mme-triton-{what}-{key}"
            self._timers.add(timer)
        timer.start()

    def _capacities(
        self, backend: Any, endpoint_name: str, changes: list[dict[str, Any]], generation: int
    ) -> None:
        if not self._is_current(backend, endpoint_name, generation):
            return

        def run_hooks() -> None:
            for change in changes:
                if change.get("DesiredInstanceCount") is None:
                    continue
                for hook in list(self.on_instance_count):
                    hook(endpoint_name, change["VariantName"], int(change["DesiredInstanceCount"]))

        reason = self._failure(endpoint_name, "instance count change", run_hooks)
        if not self._is_current(backend, endpoint_name, generation):
            return
        with self._lock:
            self._current.pop(endpoint_name, None)
        apply_capacities(backend.endpoints[endpoint_name], changes, reason=reason)

    def _failure(self, endpoint_name: str, what: str, run_hooks: Callable[[], None]) -> str | None:
        """Why the transition fails: a failure asked for with :meth:`fail_next`, else what the hooks raise
        (``None``: they ran)."""
        with self._lock:
            reason = self._failures.pop(endpoint_name, None)
        if reason is None:
            try:
                run_hooks()
            except Exception as exc:
                logger.info("endpoint %s: %s failed: %s", endpoint_name, what, exc)
                reason = str(exc) or type(exc).__name__
        return reason

    def _is_current(self, backend: Any, endpoint_name: str, generation: int) -> bool:
        with self._lock:
            current = self._current.get(endpoint_name) == generation
        return current and endpoint_name in backend.endpoints

    def _run_transition(
        self, backend: Any, endpoint_name: str, endpoint_config_name: str, generation: int, update: bool
    ) -> None:
        if not self._is_current(backend, endpoint_name, generation):
            return

        def run_hooks() -> None:
            description = describe_for_hooks(backend, endpoint_name, endpoint_config_name)
            for hook in list(self.on_in_service):
                hook(endpoint_name, description)

        reason = self._failure(endpoint_name, "transition", run_hooks)
        if not self._is_current(backend, endpoint_name, generation):
            # Deleted (or updated again) while the hooks ran: let on_deleted undo what they did.
            if endpoint_name not in backend.endpoints:
                self._run_deleted_hooks(endpoint_name)
            return
        endpoint = backend.endpoints[endpoint_name]
        with self._lock:
            self._current.pop(endpoint_name, None)
        if update and reason is None and endpoint_config_name in backend.endpoint_configs:
            switch_config(backend, endpoint, endpoint_config_name)
        elif update:
            endpoint.endpoint_status = "InService"
            endpoint.failure_reason = reason or "the endpoint configuration no longer exists"
            endpoint.last_modified_time = utcnow()
        else:
            endpoint.endpoint_status = "Failed" if reason is not None else "InService"
            endpoint.failure_reason = reason
            endpoint.last_modified_time = utcnow()

    def _endpoint_deleted(self, endpoint_name: str) -> None:
        with self._lock:
            self._current.pop(endpoint_name, None)
            self._failures.pop(endpoint_name, None)
        self._run_deleted_hooks(endpoint_name)

    def _run_deleted_hooks(self, endpoint_name: str) -> None:
        for hook in list(self.on_deleted):
            try:
                hook(endpoint_name)
            except Exception:
                logger.exception("on_deleted hook failed for endpoint %s", endpoint_name)
