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
    def test_shared(server, n, request):
        time.sleep(0.05)
        group = request.node.get_closest_marker("xdist_group").kwargs["name"]
        _log(event="test", module=__name__, n=n, group=group)
    """
)


@pytest.mark.slow
def test_tests_sharing_a_module_fixture_run_on_one_worker_that_starts_it_once(tmp_path: Path) -> None:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_first.py").write_text(SHARED)
    (tmp_path / "test_second.py").write_text(SHARED)
    (tmp_path / "test_alone.py").write_text("def test_alone():\n    pass\n")
    (tmp_path / "test_split.py").write_text("XDIST_GROUPS = 2\n" + SHARED)

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
    # XDIST_GROUPS = 2: the tests dealt into two groups; the fixture starts once on each worker they reach
    split = [r for r in records if r["module"] == "test_split"]
    tests = [r for r in split if r["event"] == "test"]
    assert sorted((r["group"], r["n"]) for r in tests) == [
        (f"test_split.py#{n % 2}", n) for n in sorted(range(6), key=lambda n: (n % 2, n))
    ]
    for group in ("test_split.py#0", "test_split.py#1"):
        assert len({r["worker"] for r in tests if r["group"] == group}) == 1
    setups = [r["worker"] for r in split if r["event"] == "setup"]
    assert sorted(setups) == sorted({r["worker"] for r in tests})


def test_groups_go_first_then_the_long_single_tests_then_the_rest(tmp_path: Path) -> None:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_a_alone.py").write_text("def test_alone():\n    pass\n")
    (tmp_path / "test_b_long.py").write_text(
        "XDIST_LONG = True\n\n\ndef test_long_one():\n    pass\n\n\ndef test_long_two():\n    pass\n"
    )
    (tmp_path / "test_c_shared.py").write_text(SHARED)

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    order = [line.split("::")[0] for line in done.stdout.splitlines() if "::" in line]
    assert order == ["test_c_shared.py"] * 6 + ["test_b_long.py"] * 2 + ["test_a_alone.py"], order
