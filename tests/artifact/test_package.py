"""package_model: layout, determinism, safety of the write, names, compression levels."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from mme_triton.artifact.package import Artifact, check_artifact_name, package_model
from mme_triton.errors import ArtifactError, ModelValidationError
from mme_triton.model.repository import JUNK_NAMES


def source_files(*models: Path) -> dict[str, bytes]:
    """arcname -> bytes for every regular file of the models, junk left out."""
    files: dict[str, bytes] = {}
    for model in models:
        for path in model.rglob("*"):
            relative = path.relative_to(model.parent)
            if path.is_file() and not JUNK_NAMES.intersection(relative.parts):
                files[relative.as_posix()] = path.read_bytes()
    return files


def extracted_files(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes() for path in root.rglob("*") if path.is_file()
    }


def members(artifact: Artifact) -> list[tarfile.TarInfo]:
    with tarfile.open(artifact.path) as archive:
        return archive.getmembers()


def test_package_model_returns_the_artifact_it_wrote(repo: Path, out_dir: Path) -> None:
    artifact = package_model(repo / "scale", out_dir)

    data = artifact.path.read_bytes()
    assert artifact.path == out_dir / "scale.tar.gz"
    assert artifact.name == "scale.tar.gz"
    assert artifact.size == len(data)
    assert artifact.sha256 == hashlib.sha256(data).hexdigest()
    assert artifact.model_name == "scale"
    assert artifact.members == ("scale",)
    assert artifact.content_digest.startswith("sha256:")
    assert len(artifact.content_digest) == len("sha256:") + 64


def test_package_model_round_trip_reproduces_the_source_files(
    repo: Path, out_dir: Path, tmp_path: Path
) -> None:
    artifact = package_model(repo / "scale", out_dir)

    target = tmp_path / "extracted"
    with tarfile.open(artifact.path) as archive:
        archive.extractall(target, filter="data")

    assert extracted_files(target) == source_files(repo / "scale")
    assert (target / "scale" / "1" / "data" / "nested").is_dir()
    assert os.access(target / "scale" / "1" / "prepare.sh", os.X_OK)


def test_package_model_puts_the_model_directory_at_the_archive_root(repo: Path, out_dir: Path) -> None:
    names = [member.name for member in members(package_model(repo / "scale", out_dir))]

    assert names[0] == "scale"
    assert all(name == "scale" or name.startswith("scale/") for name in names)
    assert "scale/config.pbtxt" in names
    assert "scale/1/model.py" in names


def test_package_model_normalises_member_metadata(repo: Path, out_dir: Path) -> None:
    infos = members(package_model(repo / "scale", out_dir))

    assert [info.name for info in infos] == sorted(info.name for info in infos)
    for info in infos:
        assert (info.mtime, info.uid, info.gid, info.uname, info.gname) == (0, 0, 0, "", "")
        assert info.isdir() or info.isfile()
    modes = {info.name: info.mode for info in infos}
    assert modes["scale"] == 0o755
    assert modes["scale/1/data"] == 0o755
    assert modes["scale/1/prepare.sh"] == 0o755
    assert modes["scale/1/model.py"] == 0o644
    assert modes["scale/config.pbtxt"] == 0o644


def test_package_model_gzip_header_has_no_time_and_no_name(repo: Path, out_dir: Path) -> None:
    artifact = package_model(repo / "scale", out_dir)

    header = artifact.path.read_bytes()[:10]
    assert header[:3] == b"\x1f\x8b\x08"  # gzip, deflate
    assert header[3] == 0  # FLG: no FNAME, no FCOMMENT, no FEXTRA
    assert header[4:8] == b"\x00\x00\x00\x00"  # MTIME
    with gzip.open(artifact.path) as stream:
        assert len(stream.read()) % 10240 == 0  # whole tar records


def test_package_model_is_byte_identical_across_runs(repo: Path, tmp_path: Path) -> None:
    first = package_model(repo / "pipeline", tmp_path / "first")
    second = package_model(repo / "pipeline", tmp_path / "second")

    assert first.path.read_bytes() == second.path.read_bytes()
    assert (first.sha256, first.content_digest) == (second.sha256, second.content_digest)


def test_package_model_is_byte_identical_from_a_copy_with_other_metadata(repo: Path, tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere" / "model_repository"
    shutil.copytree(repo, copy, symlinks=True)
    for path in sorted(copy.rglob("*"), reverse=True):
        os.utime(path, (1_234_567_890, 1_234_567_890))
        if path.is_file():
            path.chmod(0o700 if os.access(path, os.X_OK) else 0o600)
        if os.geteuid() == 0:
            os.chown(path, 4242, 4242)
    (copy / "scale").chmod(0o700)

    original = package_model(repo / "scale", tmp_path / "a")
    copied = package_model(copy / "scale", tmp_path / "b")

    assert copied.path.read_bytes() == original.path.read_bytes()


def test_package_model_output_is_read_by_the_tar_command(repo: Path, out_dir: Path, tmp_path: Path) -> None:
    artifact = package_model(repo / "pipeline", out_dir)

    listing = subprocess.run(["tar", "-tzf", str(artifact.path)], check=True, capture_output=True, text=True)
    target = tmp_path / "tar-x"
    target.mkdir()
    subprocess.run(["tar", "-xzf", str(artifact.path), "-C", str(target)], check=True)

    assert [line.rstrip("/") for line in listing.stdout.splitlines()] == [m.name for m in members(artifact)]
    assert extracted_files(target) == source_files(repo / "pipeline", repo / "scale", repo / "offset")


def test_package_model_ensemble_holds_exactly_its_components(repo: Path, out_dir: Path) -> None:
    artifact = package_model(repo / "pipeline", out_dir)

    top_level = {member.name.split("/")[0] for member in members(artifact)}
    assert top_level == {"pipeline", "scale", "offset"}
    assert artifact.members == ("offset", "pipeline", "scale")
    assert artifact.name == "pipeline.tar.gz"


def test_package_model_leaves_out_junk(repo: Path, out_dir: Path) -> None:
    names = [member.name for member in members(package_model(repo / "scale", out_dir))]

    for junk in JUNK_NAMES:
        assert not any(junk in name.split("/") for name in names), junk


def test_package_model_refuses_a_model_with_errors_and_writes_nothing(repo: Path, out_dir: Path) -> None:
    with pytest.raises(ModelValidationError) as raised:
        package_model(repo / "broken", out_dir)

    assert "config-syntax" in {problem.code for problem in raised.value.problems}
    assert raised.value.path == str(repo / "broken")
    assert not out_dir.exists() or list(out_dir.iterdir()) == []


def test_package_model_refuses_an_ensemble_whose_component_is_missing(repo: Path, out_dir: Path) -> None:
    shutil.rmtree(repo / "offset")

    with pytest.raises(ModelValidationError) as raised:
        package_model(repo / "pipeline", out_dir)

    assert "ensemble-step-model-missing" in {problem.code for problem in raised.value.problems}


def test_package_model_writes_under_a_temporary_name_until_complete(repo: Path, out_dir: Path) -> None:
    seen: list[list[str]] = []

    def progress(done: int, total: int) -> None:
        seen.append(sorted(path.name for path in out_dir.iterdir()))

    package_model(repo / "scale", out_dir, progress=progress)

    assert all(len(names) == 1 and names[0].startswith(".scale.tar.gz.tmp-") for names in seen)
    assert sorted(path.name for path in out_dir.iterdir()) == ["scale.tar.gz"]


@pytest.mark.parametrize("exception", [KeyboardInterrupt, RuntimeError], ids=["keyboard-interrupt", "error"])
def test_package_model_interrupted_leaves_the_previous_artifact_untouched(
    repo: Path, out_dir: Path, exception: type[BaseException]
) -> None:
    previous = package_model(repo / "scale", out_dir)
    previous_bytes = previous.path.read_bytes()
    (repo / "scale" / "1" / "weights.bin").write_bytes(os.urandom(300_000))

    def progress(done: int, total: int) -> None:
        if done > 0:
            raise exception("stop")

    with pytest.raises(exception):
        package_model(repo / "scale", out_dir, progress=progress)

    assert sorted(path.name for path in out_dir.iterdir()) == ["scale.tar.gz"]
    assert previous.path.read_bytes() == previous_bytes


def test_package_model_progress_counts_every_file_byte(repo: Path, out_dir: Path) -> None:
    calls: list[tuple[int, int]] = []

    package_model(repo / "pipeline", out_dir, progress=lambda done, total: calls.append((done, total)))

    expected_total = sum(
        len(data) for data in source_files(repo / "pipeline", repo / "scale", repo / "offset").values()
    )
    assert calls[0] == (0, expected_total)
    assert calls[-1] == (expected_total, expected_total)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_package_model_fails_when_a_file_shrinks_while_read(repo: Path, out_dir: Path) -> None:
    weights = repo / "scale" / "1" / "weights.bin"
    weights.write_bytes(os.urandom(3 << 20))  # several read chunks

    def progress(done: int, total: int) -> None:
        if done >= 1 << 20:  # inside weights.bin: the other files are small
            weights.write_bytes(b"")

    with pytest.raises(ArtifactError, match="shrank"):
        package_model(repo / "scale", out_dir, progress=progress)
    assert list(out_dir.iterdir()) == []


def test_package_model_does_not_follow_a_link_that_appears_after_validation(
    repo: Path, out_dir: Path
) -> None:
    config = repo / "scale" / "config.pbtxt"
    outside = repo.parent / "outside.txt"
    outside.write_text("not part of the model")

    def progress(done: int, total: int) -> None:
        if done == 0 and not config.is_symlink():
            config.unlink()
            config.symlink_to(outside)

    with pytest.raises(ArtifactError, match="symbolic link"):
        package_model(repo / "scale", out_dir, progress=progress)
    assert list(out_dir.iterdir()) == []


def test_package_model_default_out_dir_is_the_current_directory(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    artifact = package_model(repo / "offset")

    assert artifact.path == tmp_path / "offset.tar.gz"
    assert artifact.path.is_file()


def test_package_model_replaces_an_existing_artifact(repo: Path, out_dir: Path) -> None:
    out_dir.mkdir()
    (out_dir / "offset.tar.gz").write_bytes(b"old")

    artifact = package_model(repo / "offset", out_dir)

    assert artifact.path.read_bytes() != b"old"
    with tarfile.open(artifact.path) as archive:
        assert "offset/config.pbtxt" in archive.getnames()


@pytest.mark.parametrize("inside", ["scale", "scale/1"], ids=["model-directory", "version-directory"])
def test_package_model_refuses_an_out_dir_inside_the_model(repo: Path, inside: str) -> None:
    before = sorted(repo.rglob("*"))

    with pytest.raises(ValueError, match="inside the model"):
        package_model(repo / "pipeline", repo / inside / "build")

    assert sorted(repo.rglob("*")) == before


def test_package_model_asks_for_a_name_when_the_directory_cannot_be_one(repo: Path, out_dir: Path) -> None:
    (repo / "offset").rename(repo / "d\u00e9calage")

    with pytest.raises(ValueError, match="pass name="):
        package_model(repo / "d\u00e9calage", out_dir)
    artifact = package_model(repo / "d\u00e9calage", out_dir, name="decalage.tar.gz")

    assert artifact.name == "decalage.tar.gz"


def test_package_model_name_overrides_the_default(repo: Path, out_dir: Path) -> None:
    artifact = package_model(repo / "scale", out_dir, name="scale-v2.tar.gz")

    assert artifact.name == "scale-v2.tar.gz"
    assert artifact.path == out_dir / "scale-v2.tar.gz"
    assert artifact.model_name == "scale"


def test_package_model_versioned_name_follows_the_content(repo: Path, tmp_path: Path) -> None:
    first = package_model(repo / "scale", tmp_path / "1", versioned=True)
    again = package_model(repo / "scale", tmp_path / "2", versioned=True)
    (repo / "scale" / "1" / "data" / "nested" / "vocab.txt").write_text("a\nb\nc\nd\n")
    changed = package_model(repo / "scale", tmp_path / "3", versioned=True)

    assert first.name == f"scale-{first.content_digest.removeprefix('sha256:')[:12]}.tar.gz"
    assert again.name == first.name
    assert changed.name != first.name
    assert changed.name.startswith("scale-")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("scale.tgz", "must end with '.tar.gz'"),
        (".tar.gz", "must end with '.tar.gz'"),
        ("scale.tar", "must end with '.tar.gz'"),
        ("nested/scale.tar.gz", "must not contain '/'"),
        (" leading-space.tar.gz", "must not start with whitespace"),
        ("tab\there.tar.gz", "only printable ASCII"),
        ("caf\u00e9.tar.gz", "only printable ASCII"),
        ("\u00e9clair.tar.gz", "printable ASCII without whitespace"),
        ("resnet 50 (v2).tar.gz", "cannot load a model whose name holds a space"),
        ("x" * 1018 + ".tar.gz", "at most 1024 characters"),
    ],
    ids=[
        "tgz",
        "suffix-only",
        "no-gzip",
        "slash",
        "leading-space",
        "control-char",
        "non-ascii",
        "non-ascii-first",
        "inner-space",
        "1025-chars",
    ],
)
def test_package_model_rejects_a_bad_name(repo: Path, out_dir: Path, name: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        package_model(repo / "scale", out_dir, name=name)
    assert not out_dir.exists()


@pytest.mark.parametrize(
    "name",
    ["a.tar.gz", "resnet-50_(v2)+final.tar.gz", "x" * 1017 + ".tar.gz"],
    ids=["short", "punctuation", "1024-chars"],
)
def test_check_artifact_name_accepts_a_valid_name(name: str) -> None:
    assert check_artifact_name(name) == name


def test_package_model_rejects_name_together_with_versioned(repo: Path, out_dir: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        package_model(repo / "scale", out_dir, name="scale.tar.gz", versioned=True)


@pytest.mark.parametrize(
    ("level", "error"),
    [(-1, ValueError), (10, ValueError), (True, TypeError), ("1", TypeError)],
    ids=["negative", "ten", "bool", "str"],
)
def test_package_model_rejects_a_bad_compresslevel(
    repo: Path, out_dir: Path, level: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        package_model(repo / "scale", out_dir, compresslevel=level)  # type: ignore[arg-type]


@pytest.mark.parametrize("level", [0, 1, 2, 3, 6, 9], ids=lambda level: f"level-{level}")
def test_package_model_every_compresslevel_round_trips_with_the_same_content_digest(
    repo: Path, tmp_path: Path, level: int
) -> None:
    reference = package_model(repo / "scale", tmp_path / "reference")

    artifact = package_model(repo / "scale", tmp_path / f"level-{level}", compresslevel=level)

    target = tmp_path / f"extracted-{level}"
    with tarfile.open(artifact.path) as archive:
        archive.extractall(target, filter="data")
    assert extracted_files(target) == source_files(repo / "scale")
    assert artifact.content_digest == reference.content_digest


def test_package_model_stores_long_and_non_ascii_names(repo: Path, out_dir: Path, tmp_path: Path) -> None:
    data = repo / "scale" / "1" / "data"
    long_directory = data / ("d" * 90)
    long_directory.mkdir()
    (long_directory / ("f" * 60 + ".bin")).write_bytes(b"long")
    (data / "caf\u00e9-\u6a21\u578b.txt").write_text("unicode")

    artifact = package_model(repo / "scale", out_dir)

    target = tmp_path / "extracted"
    with tarfile.open(artifact.path) as archive:
        archive.extractall(target, filter="data")
    assert extracted_files(target) == source_files(repo / "scale")
    listing = subprocess.run(["tar", "-tzf", str(artifact.path)], check=True, capture_output=True)
    assert f"scale/1/data/{'d' * 90}/{'f' * 60}.bin".encode() in listing.stdout.splitlines()


def test_package_model_streams_large_files_in_bounded_memory(repo: Path, tmp_path: Path) -> None:
    # A 256 MiB sparse file costs no disk; a whole-file read would show up in the child's peak RSS
    # (VmHWM belongs to the child's own address space, unlike ru_maxrss, which survives fork + exec).
    with open(repo / "scale" / "1" / "weights.bin", "wb") as file:
        file.truncate(256 << 20)
    script = textwrap.dedent(
        f"""
        from mme_triton.artifact.package import package_model
        package_model({str(repo / "scale")!r}, {str(tmp_path / "out")!r})
        with open("/proc/self/status") as status:
            print(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)

    peak_mib = int(result.stdout.strip()) / 1024
    assert peak_mib < 160, f"peak RSS {peak_mib:.0f} MiB while packaging a 256 MiB file"


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"


@pytest.mark.parametrize(
    ("model", "expected_members"),
    [("linear", ("linear",)), ("scale", ("scale",)), ("pipeline", ("linear", "pipeline", "scale"))],
    ids=["onnx", "python", "ensemble"],
)
def test_package_model_packages_the_shipped_examples(
    tmp_path: Path, model: str, expected_members: tuple[str, ...]
) -> None:
    artifact = package_model(EXAMPLES / model, tmp_path / "out")

    target = tmp_path / "extracted"
    with tarfile.open(artifact.path) as archive:
        archive.extractall(target, filter="data")
    assert artifact.members == expected_members
    assert extracted_files(target) == source_files(*(EXAMPLES / member for member in expected_members))
