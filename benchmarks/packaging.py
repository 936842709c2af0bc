"""Packaging speed: ``package_model`` against ``tar -czf`` on a model of random float32 weights.

Run:  python benchmarks/packaging.py [--size-mib 1024] [--compresslevel 1] [--repeat 1] [--check]

Builds a Python-backend model whose version directory holds ``--size-mib`` MiB of standard-normal
float32 weights (as incompressible as real trained weights), packages it with ``package_model`` and
with ``tar -czf`` (how the AWS sample notebooks build model.tar.gz) in the same run, and prints
throughput, archive sizes and the ratios (with ``--repeat N``, the best of N runs of each, which
filters out other load on a shared machine), the load average, and how long ``package_model`` spent
after reading the last byte (mostly ``fsync``: a busy disk shows there, a busy CPU everywhere). The
goal: at least 8x faster than ``tar -czf`` with an archive no more than 1% larger. ``--check`` exits
with status 1 when the goal is missed. The temporary data is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mme_triton.artifact.package import DEFAULT_COMPRESSLEVEL, package_model

SPEEDUP_GOAL = 8.0
SIZE_GOAL = 1.01
_CHUNK_VALUES = 16 << 20  # 64 MiB of float32 per write

CONFIG = """\
name: "weights"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]
"""

MODEL_PY = """\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.weights = np.fromfile(__file__.replace("model.py", "weights.bin"), dtype=np.float32)

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", x * self.weights[: x.size])
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
"""


def build_model(repository: Path, size_bytes: int) -> Path:
    """A valid Python-backend model with ``size_bytes`` of random float32 weights in ``1/weights.bin``."""
    model = repository / "weights"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG)
    (model / "1" / "model.py").write_text(MODEL_PY)
    rng = np.random.default_rng()
    remaining = size_bytes // 4
    with open(model / "1" / "weights.bin", "wb") as file:
        while remaining:
            count = min(remaining, _CHUNK_VALUES)
            rng.standard_normal(count, dtype=np.float32).tofile(file)
            remaining -= count
    return model


def input_bytes(model: Path) -> int:
    return sum(path.stat().st_size for path in model.rglob("*") if path.is_file())


def time_package_model(model: Path, out_dir: Path, compresslevel: int) -> tuple[float, int, float]:
    """Seconds, archive size, and the seconds after the last byte was read (deflate tail, fsync, rename)."""
    last_read = 0.0

    def progress(done: int, total: int) -> None:
        nonlocal last_read
        if done == total:
            last_read = time.perf_counter()

    start = time.perf_counter()
    artifact = package_model(model, out_dir, compresslevel=compresslevel, progress=progress)
    end = time.perf_counter()
    return end - start, artifact.size, end - last_read


def time_tar_czf(model: Path, out_dir: Path) -> tuple[float, int]:
    archive = out_dir / "tar-czf.tar.gz"
    start = time.perf_counter()
    subprocess.run(["tar", "-czf", str(archive), "-C", str(model.parent), model.name], check=True)
    return time.perf_counter() - start, archive.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=1024, help="weights size in MiB (default 1024)")
    parser.add_argument("--compresslevel", type=int, default=DEFAULT_COMPRESSLEVEL)
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs of each method (default 1)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the goal is missed")
    parser.add_argument("--tmpdir", type=Path, default=None, help="where to put the temporary data")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="mme-triton-bench-", dir=args.tmpdir))
    try:
        print(f"building a model with {args.size_mib} MiB of random float32 weights in {workdir} ...")
        model = build_model(workdir / "model_repository", args.size_mib << 20)
        total = input_bytes(model)
        out_dir = workdir / "out"
        out_dir.mkdir()
        os.sync()

        load_before = os.getloadavg()[0]
        ours_seconds, ours_size, ours_tail = min(
            time_package_model(model, out_dir, args.compresslevel) for _ in range(max(args.repeat, 1))
        )
        tar_seconds, tar_size = min(time_tar_czf(model, out_dir) for _ in range(max(args.repeat, 1)))
        load_after = os.getloadavg()[0]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    rows = [
        (f"package_model (ISA-L, compresslevel={args.compresslevel})", ours_seconds, ours_size),
        ("tar -czf (gzip -6)", tar_seconds, tar_size),
    ]
    print(f"\ninput: {total / 1e6:,.1f} MB")
    print(f"{'method':<42} {'seconds':>8} {'MB/s':>8} {'archive MB':>11} {'ratio':>7}")
    for label, seconds, size in rows:
        print(
            f"{label:<42} {seconds:8.2f} {total / seconds / 1e6:8.1f} {size / 1e6:11.1f} {size / total:7.4f}"
        )
    print(
        f"package_model spent {ours_tail:.2f} s after reading the last byte (deflate tail, fsync, rename); "
        "tar -czf does not fsync"
    )
    print(f"load average (1 min, {os.cpu_count()} CPUs): {load_before:.2f} before, {load_after:.2f} after")
    speedup = tar_seconds / ours_seconds
    size_ratio = ours_size / tar_size
    met = speedup >= SPEEDUP_GOAL and size_ratio <= SIZE_GOAL
    print(f"\nspeed-up over tar -czf: {speedup:.1f}x (goal >= {SPEEDUP_GOAL:g}x)")
    print(f"archive size vs tar -czf: {size_ratio:.4f} (goal <= {SIZE_GOAL})")
    print(f"goal {'met' if met else 'MISSED'}")
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
