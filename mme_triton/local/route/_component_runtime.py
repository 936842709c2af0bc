"""One inference component on an endpoint that hosts it: its copies in the routing, how a request picks
one (``RoutingConfig``), and how they change (see :mod:`mme_triton.local.route.components`)."""

from __future__ import annotations

import logging
import random
import shutil
import threading
import warnings
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mme_triton._sagemaker import INVOCATION_TIMEOUT_SECONDS
from mme_triton.errors import MMETritonWarning
from mme_triton.local.route._component_metrics import ComponentSink, CopyUsageSampler
from mme_triton.local.route._copies import CopyRuntime, CopyStartError

if TYPE_CHECKING:
    from mme_triton.local.route.components import ComponentEndpoint

__all__ = ["DRAIN_TIMEOUT", "ComponentRuntime"]

logger = logging.getLogger("mme_triton.local.route.components")

DRAIN_TIMEOUT = INVOCATION_TIMEOUT_SECONDS + 5.0
"""Seconds a copy leaving the routing waits for its requests (each takes at most 60 s) before it stops."""


class ComponentRuntime:
    """One component on the endpoint: its copies in the routing and the repositories they serve."""

    def __init__(self, name: str, endpoint: ComponentEndpoint, sink: ComponentSink) -> None:
        self.name = name
        self.endpoint = endpoint
        self.sink = sink
        self.planned = 0
        """The copies the control plane says the component has (``InvocationsPerCopy`` counts them)."""
        self.version = 0
        self._copies: list[CopyRuntime] = []
        self._repositories: dict[int, Path] = {}
        self._pinned: Counter[int] = Counter()  # versions whose copies are starting
        self._lock = threading.Lock()
        self._apply_lock = threading.Lock()
        self._draw = random.Random()
        self._sampled = False
        self._plan: dict[str, Any] = {}

    @property
    def copies(self) -> list[CopyRuntime]:
        """The copies in the routing."""
        return list(self._copies)

    def take(self) -> CopyRuntime | None:
        """A copy for one request, counted on it (:meth:`CopyRuntime.release` when done); ``None`` when the
        component has none."""
        for _ in range(8):
            copies = [c for c in self._copies if not c.retired]
            if not copies:
                return None
            if self.endpoint.routing == "RANDOM":
                chosen = copies[int(self._draw.random() * len(copies))]
            else:
                least = min(c.in_flight for c in copies)
                best = [c for c in copies if c.in_flight == least]
                chosen = best[int(self._draw.random() * len(best))] if len(best) > 1 else best[0]
            if chosen.enter():
                return chosen
        return None

    def apply(self, plan: Mapping[str, Any]) -> None:
        """Run the copies ``plan["Copies"]`` names: new ones started (side by side) and added to the routing,
        the others retired and stopped once their requests have finished.

        Raises:
            CopyStartError: a new copy could not start (those started for this plan are stopped again).
        """
        with self._apply_lock:
            wanted = {c["CopyId"]: c["InstanceId"] for c in plan.get("Copies") or []}
            version = int(plan.get("Version") or 1)
            with self._lock:
                current = {c.copy_id: c for c in self._copies}
            starting = [(copy_id, instance) for copy_id, instance in wanted.items() if copy_id not in current]
            leaving = [c for copy_id, c in current.items() if copy_id not in wanted]
            started = self._start(starting, version, plan) if starting else []
            with self._lock:
                orphaned = started if self.endpoint.closed else []  # the stack stopped meanwhile
                if not orphaned:
                    self._copies = [c for c in self._copies if c not in leaving] + started
                    self.planned = len(wanted)
                    self.version = version
            if orphaned:
                for copy in orphaned:
                    copy.close()
                self.endpoint.budget.give(len(orphaned))
                raise CopyStartError(f"Endpoint {self.endpoint.endpoint_name} is not in service.")
            stoppers = []
            for copy in leaving:
                copy.retire()
                stoppers.append(self._stop_when_done(copy))
            if plan.get("Deleted"):  # a component is gone once its copies have stopped
                for stopper in stoppers:
                    stopper.join()
            self._plan = dict(plan)
            if started and not self._sampled:
                self._sample(plan)
        logger.info(
            "inference component %s: %d copies serving (%s)",
            self.name,
            len(self._copies),
            ", ".join(f"{c.copy_id}@{c.instance_id}" for c in self._copies) or "none",
        )

    def replace(self, dead: CopyRuntime) -> None:
        """A copy whose Triton exited leaves the routing now; a new Triton for it starts in the background
        (SageMaker replaces an unhealthy container) and joins the routing once it answers."""
        with self._lock:
            if dead not in self._copies or dead.retired:
                return
            dead.retire()
            repository, plan = self._repositories.get(dead.version), self._plan

        def run() -> None:
            dead.close()
            new: CopyRuntime | None = None
            try:
                if repository is not None and not self.endpoint.closed:
                    new = self.endpoint.start_copy(
                        self.name, dead.copy_id, dead.instance_id, dead.version, repository, plan
                    )
            except CopyStartError as exc:
                logger.warning("copy %s could not be replaced: %s", dead.copy_id, exc)
            with self._lock:
                placed = new is not None and dead in self._copies and not self.endpoint.closed
                if placed:
                    self._copies[self._copies.index(dead)] = new  # type: ignore[assignment]
                elif dead in self._copies:
                    self._copies.remove(dead)
            if not placed:
                if new is not None:
                    new.close()
                self.endpoint.budget.give(1)
            logger.info("copy %s %s", dead.copy_id, "replaced" if placed else "gone")

        threading.Thread(target=run, name=f"replace-{dead.copy_id}", daemon=True).start()

    def _start(
        self, starting: list[tuple[str, str]], version: int, plan: Mapping[str, Any]
    ) -> list[CopyRuntime]:
        budget = self.endpoint.budget
        allowed = budget.take(len(starting))
        if allowed < len(starting):
            message = (
                f"inference component {self.name}: {len(starting) - allowed} of its copies do not run: the "
                f"stack runs at most {budget.limit} copies (LocalStack(max_copies=), each is a Triton on "
                "this machine), so fewer serve it than DescribeInferenceComponent says"
            )
            logger.warning("%s", message)
            warnings.warn(message, MMETritonWarning, stacklevel=2)
        starting = starting[:allowed]
        if not starting:
            return []
        with self._lock:
            self._pinned[version] += 1  # its repository stays while copies of it start
        try:
            return self._start_on(starting, version, plan)
        finally:
            with self._lock:
                self._pinned[version] -= 1

    def _start_on(
        self, starting: list[tuple[str, str]], version: int, plan: Mapping[str, Any]
    ) -> list[CopyRuntime]:
        budget = self.endpoint.budget
        try:
            repository = self._repository(version, plan)
        except BaseException:
            budget.give(len(starting))
            raise
        started: dict[str, CopyRuntime] = {}
        failures: list[BaseException] = []

        def run(copy_id: str, instance: str) -> None:
            try:
                started[copy_id] = self.endpoint.start_copy(
                    self.name, copy_id, instance, version, repository, plan
                )
            except BaseException as exc:  # reported below, once the others started or failed
                failures.append(exc)

        threads = [threading.Thread(target=run, args=pair, name=f"start-{pair[0]}") for pair in starting]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if self.endpoint.closed and not failures:
            failures.append(CopyStartError(f"Endpoint {self.endpoint.endpoint_name} is not in service."))
        if failures:
            for copy in started.values():
                copy.close()
            budget.give(len(starting))
            self._forget_unused()
            failure = failures[0]
            raise failure if isinstance(failure, CopyStartError) else CopyStartError(str(failure))
        return [started[copy_id] for copy_id, _ in starting]

    def _repository(self, version: int, plan: Mapping[str, Any]) -> Path:
        with self._lock:
            found = self._repositories.get(version)
        if found is not None:
            return found
        repository = self.endpoint.prepare(self.name, version, plan)
        with self._lock:
            self._repositories[version] = repository
        return repository

    def _forget_unused(self) -> None:
        """Delete the repositories no copy serves any more."""
        with self._lock:
            used = {c.version for c in self._copies} | {v for v, n in self._pinned.items() if n > 0}
            doomed = {v: r for v, r in self._repositories.items() if v not in used}
            for version in doomed:
                del self._repositories[version]
        for repository in doomed.values():
            shutil.rmtree(repository.parent, ignore_errors=True)

    def _stop_when_done(self, copy: CopyRuntime, drain_timeout: float = DRAIN_TIMEOUT) -> threading.Thread:
        def stop() -> None:
            try:
                copy.close(drain_timeout=drain_timeout)
            finally:
                self.endpoint.budget.give(1)
                self.sink.copy_gone(copy.copy_id)
                self._forget_unused()

        thread = threading.Thread(target=stop, name=f"retire-{copy.copy_id}", daemon=True)
        thread.start()
        return thread

    def _sample(self, plan: Mapping[str, Any]) -> None:
        requirements = plan.get("ComputeResourceRequirements") or {}
        cores = requirements.get("NumberOfCpuCoresRequired")
        memory = float(requirements.get("MinMemoryRequiredInMb") or 0) * 1024 * 1024
        self.sink.on_publish(
            CopyUsageSampler(
                lambda: [(c.copy_id, c.triton) for c in self._copies],
                cores=float(cores) if cores else None,
                memory_bytes=memory,
            )
        )
        self._sampled = True

    def close(self, *, drain_timeout: float = 0.0) -> None:
        """Stop every copy (side by side) and delete the repositories."""
        with self._lock:
            copies, self._copies = self._copies, []
        threads = [
            threading.Thread(
                target=c.close, kwargs={"drain_timeout": drain_timeout}, name=f"stop-{c.copy_id}"
            )
            for c in copies
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.endpoint.budget.give(len(copies))
        self._forget_unused()
        self.sink.close()
