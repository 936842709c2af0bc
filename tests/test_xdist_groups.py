"""tests/conftest.py under pytest-xdist: tests that share a module-scoped fixture run on one worker, which
starts the fixture once (CI runs the suite with ``-n 4 --dist loadgroup``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CONFTEST = Path(__file__).parent / "conftest.py"

SHARED = textwrap.dedent(
    """
    import json, os, time
    from pathlib import Path

    import pytest

    LOG = Path(__file__).parent / "runs.jsonl"


    def _log(**record):
        with LOG.open("a") as out:
            out.write(json.dumps({"worker": os.environ.get("PYTEST_XDIST_WORKER"), **record}) + "\\n")


    @pytest.fixture(scope="module")
    def server():
        _log(event="setup", module=__name__)
        yield


    @pytest.mark.parametrize("n", range(6))
    def test_shared(server, n):
        time.sleep(0.05)
        _log(event="test", module=__name__, n=n)
    """
)


@pytest.mark.slow
def test_tests_sharing_a_module_fixture_run_on_one_worker_that_starts_it_once(tmp_path: Path) -> None:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_first.py").write_text(SHARED)
    (tmp_path / "test_second.py").write_text(SHARED)
    (tmp_path / "test_alone.py").write_text("def test_alone():\n    pass\n")

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    for module in ("test_first", "test_second"):
        mine = [r for r in records if r["module"] == module]
        assert [r["event"] for r in mine].count("setup") == 1, mine
        assert sorted(r["n"] for r in mine if r["event"] == "test") == list(range(6))
        assert len({r["worker"] for r in mine}) == 1, mine
        assert mine[0]["worker"] is not None  # it ran under xdist
