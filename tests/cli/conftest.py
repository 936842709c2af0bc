"""Fixtures of the command-line tests: AWS reached the way a shell reaches it, through the environment.

- ``aws_env``: the embedded stack's control plane (moto, no Triton), its credentials, region and URL
  exported as ``AWS_*`` variables; yields a ModelDataUrl whose bucket exists.
- ``bare_aws``: no AWS set-up at all (empty config and credentials files, no ``AWS_*`` variables, no
  instance metadata), as on a new user's machine.
- ``fake_aws``: an HTTP server answering every AWS call with one error, as AWS answers an expired token
  or a denied permission; ``AWS_ENDPOINT_URL`` points at it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@pytest.fixture
def bare_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No region, no credentials, no profile: empty ~/.aws files and no AWS_* variables."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    empty = tmp_path / "empty-aws-file"
    empty.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, bare_aws: None) -> Iterator[str]:
    """The control plane, reached the way another process reaches it: through AWS_* variables."""
    from mme_triton.local.aws.controlplane import ControlPlane

    with ControlPlane(transition_delay=0.05) as plane:
        credentials = plane.boto3_session().get_credentials()
        assert credentials is not None
        frozen = credentials.get_frozen_credentials()
        monkeypatch.setenv("AWS_ENDPOINT_URL", plane.url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", frozen.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", frozen.secret_key)
        if frozen.token:
            monkeypatch.setenv("AWS_SESSION_TOKEN", frozen.token)
        monkeypatch.setenv("AWS_DEFAULT_REGION", plane.region)
        plane.client("s3").create_bucket(Bucket=f"cli-{plane.account_id}")
        yield f"s3://cli-{plane.account_id}/models/"


class FakeAWS:
    """Answers every request with one AWS error: JSON for the JSON protocols (SageMaker), XML for S3."""

    def __init__(self) -> None:
        self.code = "AccessDeniedException"
        self.message = "User is not authorized to perform this action"
        self.status = 400
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("X-Amz-Target"):
                    body = json.dumps({"__type": fake.code, "message": fake.message}).encode()
                    content_type = "application/x-amz-json-1.1"
                else:
                    body = (
                        f"<Error><Code>{fake.code}</Code><Message>{fake.message}</Message></Error>".encode()
                    )
                    content_type = "application/xml"
                self.send_response(fake.status)
                self.send_header("Content-Type", content_type)
                self.send_header("x-amzn-ErrorType", fake.code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch, bare_aws: None) -> Iterator[Callable[[str, str, int], None]]:
    """``answer(code, message, status)`` sets the error every AWS call gets; credentials and region set."""
    server = FakeAWS()
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "token")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    def answer(code: str, message: str, status: int = 400) -> None:
        server.code, server.message, server.status = code, message, status

    try:
        yield answer
    finally:
        server.close()
