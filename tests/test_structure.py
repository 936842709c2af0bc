"""The package's shape: each SageMaker fact defined once, modules a newcomer can read, the data plane alone.

These tests read the package's own source: a second copy of a SageMaker rule is the mistake they catch.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mme_triton
from mme_triton import _sagemaker

PACKAGE = Path(mme_triton.__file__).parent
# The python-based backends run inside Triton's stub process and cannot import the library.
SOURCES = sorted(path for path in PACKAGE.rglob("*.py") if "backends" not in path.relative_to(PACKAGE).parts)
MAX_MODULE_LINES = 500
# The pure codec reads as one table-driven piece: the datatype rules, the JSON and the binary format side
# by side (see the closing note of the restructuring in CHANGELOG.md).
LONG_MODULES = {"client/codec.py"}


def _source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("fact", "pattern"),
    [
        ("the 6 MiB payload limit", r"\b6\s*\*\s*1024\s*\*\s*1024|\b6_?291_?456|\b6\s*\*\s*2\s*\*\*\s*20"),
        ("the TargetModel header", r"(?i)x-amzn-sagemaker-target-model"),
        ("the TargetModel length", r"\b1024\b.*(?i:target)|(?i:target).*\b1024\b"),
        ("S3 URL parsing", r"""(?:startswith|removeprefix)\(\s*["']s3://["']|\[5:\]\.partition"""),
        ("error-code extraction", r"""\.get\(\s*["']Code["']|\[\s*["']Code["']\s*\]"""),
        ("reading the serving container", r"""(?:get\(|\[)\s*["'](?:PrimaryContainer|Containers)["']"""),
        ("the ensemble pattern of SageMaker's front-end", r"""platform\\s\*?:?\\s\*"""),
        ("the namespaces of SageMaker's metrics", r"""["'](?:AWS/SageMaker|/aws/sagemaker/Endpoints)["']"""),
    ],
    ids=[
        "payload-limit",
        "header",
        "target-model-length",
        "s3-url",
        "error-code",
        "container",
        "ensemble",
        "metric-namespace",
    ],
)
def test_sagemaker_fact_is_defined_only_in_sagemaker_module(fact: str, pattern: str) -> None:
    copies = _copies_outside("_sagemaker.py", pattern)
    assert copies == [], f"{fact} is defined again outside mme_triton/_sagemaker.py:\n" + "\n".join(copies)


def _copies_outside(home: str, pattern: str) -> list[str]:
    """The lines of the package's sources, but ``home``, that ``pattern`` finds (comments aside)."""
    return [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in SOURCES
        if path.name != home
        for number, line in enumerate(_source(path).splitlines(), start=1)
        if re.search(pattern, line) and not line.lstrip().startswith("#")
    ]


@pytest.mark.parametrize(
    ("module", "name", "fact"),
    [
        ("mme_triton.client.client", "MAX_PAYLOAD_BYTES", "MAX_PAYLOAD_BYTES"),
        ("mme_triton.client", "MAX_PAYLOAD_BYTES", "MAX_PAYLOAD_BYTES"),
        ("mme_triton.local.route.runtime", "MAX_PAYLOAD_BYTES", "MAX_PAYLOAD_BYTES"),
        ("mme_triton.local.route.responses", "MAX_PAYLOAD_BYTES", "MAX_PAYLOAD_BYTES"),
        ("mme_triton.local.triton.server", "TARGET_MODEL_HEADER", "TARGET_MODEL_HEADER"),
        ("mme_triton.local.route.runtime", "TARGET_MODEL_HEADER", "TARGET_MODEL_HEADER"),
        ("mme_triton.client._core", "check_target_model", "check_target_model"),
        ("mme_triton.artifact.s3", "check_target_model", "check_target_model"),
        ("mme_triton.local.route.runtime", "target_model_problem", "target_model_problem"),
        ("mme_triton.artifact.package", "target_model_problem", "target_model_problem"),
        ("mme_triton.artifact.s3", "parse_s3_url", "parse_s3_url"),
        ("mme_triton.artifact", "parse_s3_url", "parse_s3_url"),
        ("mme_triton.local.route._describe", "parse_s3_url", "parse_s3_url"),
        ("mme_triton.local.route._cache", "parse_s3_url", "parse_s3_url"),
        ("mme_triton.endpoint._resolve", "parse_s3_url", "parse_s3_url"),
        ("mme_triton.client._core", "parse_s3_url", "parse_s3_url"),
        ("mme_triton.client._errors_map", "error_code", "error_code"),
        ("mme_triton.endpoint._recovery", "error_code", "error_code"),
        ("mme_triton.endpoint._retry", "is_transient", "is_transient"),
        ("mme_triton.endpoint.handle", "is_transient", "is_transient"),
        ("mme_triton.endpoint.teardown", "error_code", "error_code"),
        ("mme_triton.endpoint.autoscaling", "error_code", "error_code"),
        ("mme_triton.local.route._cache", "error_code", "error_code"),
        ("mme_triton.artifact.s3", "error_code", "error_code"),
        ("mme_triton.endpoint._teardown_components", "model_data_url_of", "model_data_url_of"),
        ("mme_triton.endpoint.models", "model_data_url_of", "model_data_url_of"),
        ("mme_triton.local.route._describe", "model_data_url_of", "model_data_url_of"),
        ("mme_triton.local.route._describe", "serving_container", "serving_container"),
        ("mme_triton.model._ensemble", "ENSEMBLE_CONFIG_PATTERN", "ENSEMBLE_CONFIG_PATTERN"),
        ("mme_triton.local.route.extract", "ENSEMBLE_CONFIG_PATTERN", "ENSEMBLE_CONFIG_PATTERN"),
        ("mme_triton.endpoint._metric_queries", "ENDPOINT_METRICS", "ENDPOINT_METRICS"),
        ("mme_triton.endpoint.metrics", "ENDPOINT_METRICS", "ENDPOINT_METRICS"),
        ("mme_triton.local.aws.metrics", "ENDPOINT_METRICS", "ENDPOINT_METRICS"),
    ],
)
def test_stages_import_the_one_definition(module: str, name: str, fact: str) -> None:
    assert getattr(importlib.import_module(module), name) is getattr(_sagemaker, fact)


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("mme_triton.endpoint.images", "TRITON_PYTHON"),
        ("mme_triton.endpoint.images", "DEFAULT_TRITON_VERSION"),
        ("mme_triton.endpoint.deploy", "DEFAULT_TRITON_VERSION"),
    ],
)
def test_stages_import_the_one_release_table(module: str, name: str) -> None:
    """The default release and each release's Python are defined once, where the model stage reads them."""
    from mme_triton import _triton_releases

    assert getattr(importlib.import_module(module), name) is getattr(_triton_releases, name)


@pytest.mark.parametrize(
    ("module", "name", "rule"),
    [
        ("mme_triton.capacity._engine", "route_to", "route"),
        ("mme_triton.capacity._engine", "place_on", "place"),
        ("mme_triton.capacity._engine", "IDLE_AFTER_S", "IDLE_AFTER_S"),
        ("mme_triton.local.route.endpoint_runtime", "route", "route"),
        ("mme_triton.local.route.endpoint_runtime", "place", "place"),
        ("mme_triton.local.route._lifecycle", "unused", "unused"),
    ],
)
def test_simulator_and_stack_route_by_the_one_rule(module: str, name: str, rule: str) -> None:
    """How a variant's instances share requests and memory is decided once (``mme_triton._multimodel``):
    the capacity simulator and the embedded stack use the same functions and constants."""
    from mme_triton import _multimodel

    assert getattr(importlib.import_module(module), name) is getattr(_multimodel, rule)


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(PACKAGE)) for p in SOURCES])
def test_module_stays_readable(path: Path) -> None:
    relative = path.relative_to(PACKAGE).as_posix()
    lines = len(_source(path).splitlines())
    if relative in LONG_MODULES:
        return
    assert lines <= MAX_MODULE_LINES, f"{relative} has {lines} lines; split it along its seams"


def test_long_module_exceptions_are_still_long() -> None:
    # An exception that no longer applies is removed from the list, so the list stays true.
    for relative in LONG_MODULES:
        assert len(_source(PACKAGE / relative).splitlines()) > MAX_MODULE_LINES, relative


def test_public_all_and_lazy_table_agree() -> None:
    from mme_triton import errors

    eager = set(errors.__all__) | {"__version__"}
    assert set(mme_triton.__all__) == set(mme_triton._LAZY) | eager
    assert not set(mme_triton._LAZY) & eager


@pytest.mark.parametrize("name", sorted(mme_triton._LAZY))
def test_lazy_table_names_the_defining_module(name: str) -> None:
    module = mme_triton._LAZY[name]
    value = getattr(importlib.import_module(module), name)
    assert getattr(value, "__module__", module) == module, f"{name} is defined in {value.__module__}"


# The embedded stack's wings (CONTRIBUTING.md): what each may import of mme_triton.local. The modules above
# the wings (stack, serve, cli, quickstart, notebook) put them together.
_WING_IMPORTS = {
    "aws": {"aws"},
    "triton": {"triton"},
    "route": {"route", "triton"},
}
_LOCAL_IMPORT = re.compile(r"^\s*(?:from|import)\s+mme_triton\.local\.(\w+)", re.MULTILINE)


@pytest.mark.parametrize("wing", sorted(_WING_IMPORTS))
def test_local_wings_import_only_along_the_grain(wing: str) -> None:
    allowed = _WING_IMPORTS[wing]
    against = [
        f"{path.relative_to(PACKAGE)}: mme_triton.local.{target}"
        for path in SOURCES
        if path.relative_to(PACKAGE).parts[:2] == ("local", wing)
        for target in _LOCAL_IMPORT.findall(_source(path))
        if target not in allowed
    ]
    assert against == [], f"local/{wing}/ imports against the grain:\n" + "\n".join(against)


def test_every_package_module_imports() -> None:
    optional = ("mme_triton.export.", "mme_triton.local.triton.backends", "mme_triton.__main__")
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="mme_triton."):
        if info.name.startswith(optional):
            continue
        importlib.import_module(info.name)


def test_client_infer_loads_no_control_plane_module(tmp_path: Path) -> None:
    """``from mme_triton import MMEClient`` and one ``infer()`` touch neither packaging nor the control
    plane: the request is answered by a plain HTTP server playing InvokeEndpoint."""
    script = textwrap.dedent(
        """
        import json, sys, threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import numpy as np
        from mme_triton import MMEClient

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                body = json.dumps({"outputs": [
                    {"name": "y", "datatype": "FP32", "shape": [2], "data": [1.0, 2.0]}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        import boto3
        runtime = boto3.client(
            "sagemaker-runtime", endpoint_url=f"http://127.0.0.1:{server.server_address[1]}",
            region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        out = MMEClient("ep", runtime_client=runtime).infer("m.tar.gz", {"x": np.ones(2, np.float32)})
        assert out["y"].tolist() == [1.0, 2.0], out
        server.shutdown()
        loaded = sorted(m for m in sys.modules if m.startswith("mme_triton"))
        print(json.dumps(loaded))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path, timeout=120
    )
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert "mme_triton.client.client" in loaded
    stages = [
        m for m in loaded if m.startswith(("mme_triton.artifact", "mme_triton.endpoint", "mme_triton.model"))
    ]
    assert stages == [], f"the data plane imported {stages}"


def test_pyproject_license_is_an_spdx_expression() -> None:
    """PEP 639: ``project.license`` is an SPDX expression; the TOML table form is deprecated by setuptools
    (which warns on every build) and needs setuptools 77 to be replaced."""
    text = (PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8")
    project = text.split("[project]", 1)[1].split("\n[", 1)[0]  # read as text: tomllib is 3.11+
    assert re.search(r'^license = "Apache-2.0"$', project, re.MULTILINE), project
    assert re.search(r'^license-files = \["LICENSE"\]$', project, re.MULTILINE)
    assert (PACKAGE.parent / "LICENSE").is_file()
    assert '"setuptools>=77"' in text.split("[build-system]", 1)[1].split("\n[", 1)[0]
    assert "License ::" not in project  # a license classifier beside an expression is refused


@pytest.mark.parametrize(
    ("fact", "pattern"),
    [
        ("the InferenceComponentName header", r"(?i)x-amzn-sagemaker-inference-component\b"),
        ("the copy count's dimension", r"""["']sagemaker:inference-component:DesiredCopyCount["']"""),
        ("the components' metric namespace", r"""["']/aws/sagemaker/InferenceComponents["']"""),
        ("the components' resource id", r"""["']inference-component/"""),
    ],
    ids=["header", "dimension", "namespace", "resource-id"],
)
def test_inference_component_fact_is_defined_only_in_its_module(fact: str, pattern: str) -> None:
    copies = _copies_outside("_inference_components.py", pattern)
    assert copies == [], (
        f"{fact} is defined again outside mme_triton/_inference_components.py:\n" + "\n".join(copies)
    )


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("mme_triton.local.route.runtime_server", "INFERENCE_COMPONENT_HEADER"),
        ("mme_triton.local.route._hosting", "INFERENCE_COMPONENT_HEADER"),
        ("mme_triton.local.aws.autoscaling", "COPY_COUNT_DIMENSION"),
        ("mme_triton.local.aws._component_scaling", "COPY_COUNT_DIMENSION"),
        ("mme_triton.local.aws._components", "place_copy"),
        ("mme_triton.local.aws.component_metrics", "COMPONENT_METRICS"),
    ],
)
def test_stages_import_the_one_inference_component_definition(module: str, name: str) -> None:
    """Inference components' names, limits and placement are defined once, in
    ``mme_triton._inference_components``, for the library and the embedded stack."""
    from mme_triton import _inference_components

    assert getattr(importlib.import_module(module), name) is getattr(_inference_components, name)
