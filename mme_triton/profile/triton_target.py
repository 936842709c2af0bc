"""A Triton server the user runs (``triton_url=``), e.g. the Triton container on a GPU machine.

Each candidate is loaded through Triton's model repository API, which needs the server started with
``--model-control-mode=explicit``: ``POST /v2/repository/models/<name>/load`` with the candidate's config
as a ``config`` override and every file of the model as ``file:<path>`` contents (base64), so nothing has to
be copied onto the server's disk first. The name is the candidate's own for this run (the config's
``name`` follows it); it is unloaded (``POST .../unload``) after it was measured. Triton unloads in the
background and does not list a model loaded from override files in its repository index, so the unload
time is not measured here (the stack measures it). This is the way to measure what the CPU stack cannot
run: TensorRT, CUDA graphs, GPU instance groups.

Limits (a candidate over them fails, with the reason): the files of one candidate may be at most
:data:`MAX_UPLOAD_BYTES` (they travel in one JSON body); an ensemble is refused (its steps would have to be
loaded under their own names first: profile the steps, or use the endpoint or stack targets).
"""

from __future__ import annotations

import base64
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mme_triton.errors import ProfileError
from mme_triton.profile.candidates import PreparedCandidate
from mme_triton.profile.inputs import Request
from mme_triton.profile.load import Connection, Stats
from mme_triton.profile.targets import ColdStart, Deployed, target_model_name
from mme_triton.profile.transports import HTTPConnection, first_answer, http_json, triton_statistics

__all__ = ["MAX_UPLOAD_BYTES", "TritonTarget"]

logger = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 512 * 1024 * 1024
"""A candidate's files sent in one repository-API load request at most (512 MiB; base64 adds a third)."""


class TritonTarget:
    """Candidates loaded into a running Triton through its repository API, measured on its KServe v2 route."""

    kind = "triton"

    def __init__(self, url: str, *, run_id: str, max_upload_bytes: int = MAX_UPLOAD_BYTES) -> None:
        if not url.startswith(("http://", "https://")):
            url = f"http://{url}"
        self.url = url.rstrip("/")
        self.run_id = run_id
        self._max_upload = max_upload_bytes

    def open(self) -> None:
        try:
            status, _ = http_json(f"{self.url}/v2/health/live", timeout=10.0)
        except OSError as exc:
            raise ProfileError(f"cannot reach Triton at {self.url}: {exc}") from exc
        if status != 200:
            raise ProfileError(f"Triton at {self.url} is not live (GET /v2/health/live answered {status})")

    def reaches_triton(self) -> bool:
        return True

    def deploy(self, prepared: PreparedCandidate, index: int) -> Deployed:
        del index
        import importlib

        from mme_triton.model.authoring import read_config

        json_format: Any = importlib.import_module("google.protobuf.json_format")

        assert prepared.model_dir is not None
        directory = prepared.model_dir
        config = read_config(directory)
        if config.platform == "ensemble" or config.backend == "ensemble":
            raise ValueError(
                f"{prepared.name}: an ensemble cannot be loaded through the repository API with its steps; "
                "profile its steps, or use the stack or endpoint targets"
            )
        name = target_model_name(prepared, self.run_id, suffix="")
        config.name = name
        files = _model_files(directory, self._max_upload, prepared.name)
        parameters = {"config": json_format.MessageToJson(config, preserving_proto_field_name=True)}
        for relative, path in files:
            parameters[f"file:{relative}"] = base64.b64encode(path.read_bytes()).decode("ascii")
        return Deployed(name, directory, payload={"parameters": parameters})

    def cold_start(self, deployed: Deployed, request: Request) -> ColdStart:
        started = time.perf_counter()
        status, answer = http_json(
            f"{self.url}/v2/repository/models/{deployed.name}/load",
            method="POST",
            body=deployed.payload,
            timeout=600.0,
        )
        load_s = time.perf_counter() - started
        deployed.payload = None  # the files' copy in memory is no longer needed
        if status != 200:
            message = answer.get("error") if isinstance(answer, dict) else answer
            return ColdStart(load_s, load_s=load_s, error=f"HTTP {status}: {message}")
        deployed.loaded = True
        connection = self.connect(deployed)()
        try:
            first, error = first_answer(connection, request)
        finally:
            connection.close()
        return ColdStart(load_s + first, load_s=load_s, error=error)

    def connect(self, deployed: Deployed) -> Callable[[], Connection]:
        path = f"/v2/models/{deployed.name}/infer"
        return lambda: HTTPConnection(self.url, path, kserve=True)

    def memory(self, deployed: Deployed) -> int | None:
        return None  # Triton reports no per-model host memory; see docs/profile.md

    def triton_http(self, deployed: Deployed) -> tuple[str, str] | None:
        return self.url, deployed.name

    def stats(self, deployed: Deployed) -> Stats | None:
        return triton_statistics(self.url, deployed.name)

    def unload(self, deployed: Deployed) -> float | None:
        """Unload the model; ``None``: Triton unloads in the background and its repository index does not
        list a model loaded from override files, so when the unload completes cannot be observed."""
        if not deployed.loaded:
            return None
        status, answer = http_json(
            f"{self.url}/v2/repository/models/{deployed.name}/unload", method="POST", body={}
        )
        if status != 200:
            logger.warning("Triton refused to unload %s: %s", deployed.name, answer)
        deployed.loaded = False
        return None

    def remove(self, deployed: Deployed) -> None:
        if deployed.loaded:
            try:
                self.unload(deployed)
            except OSError as exc:
                logger.warning("unloading %s from %s failed: %s", deployed.name, self.url, exc)

    def close(self) -> None:
        pass


def _model_files(directory: Path, limit: int, name: str) -> list[tuple[str, Path]]:
    """Every regular file of the model but its config, as ``(relative path, path)``; within ``limit``."""
    files: list[tuple[str, Path]] = []
    total = 0
    for root, _dirs, names in os.walk(directory):
        for filename in sorted(names):
            path = Path(root) / filename
            relative = path.relative_to(directory).as_posix()
            if relative == "config.pbtxt" or not path.is_file():
                continue
            total += path.stat().st_size
            if total > limit:
                raise ValueError(
                    f"{name}: the model's files are over {limit} bytes, more than one repository-API load "
                    "request carries here (max_upload_bytes); put the model in the server's repository and "
                    "profile it through an endpoint"
                )
            files.append((relative, path))
    return files
