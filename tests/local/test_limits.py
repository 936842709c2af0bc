"""bound_triton_args: the serve script's arguments kept within what the stack lets an endpoint take."""

from __future__ import annotations

import pytest

from mme_triton.local.route.limits import check_limits
from mme_triton.local.serve import serve_args
from mme_triton.local.triton.options import DEFAULT_SHM_LIMIT, MAX_THREADS, bound_triton_args, check_shm_limit

MiB = 1024 * 1024
GiB = 1024 * MiB


def _shm(args: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for arg in args:
        if arg.startswith("--backend-config=python,shm-"):
            key, _, value = arg.removeprefix("--backend-config=python,").partition("=")
            found[key] = value
    return found


def test_bound_triton_args_keeps_the_containers_defaults() -> None:
    bounded = bound_triton_args(serve_args({}))

    assert _shm(bounded.args) == {"shm-default-byte-size": str(16 * MiB), "shm-growth-byte-size": str(MiB)}
    assert bounded.lowered == [] and bounded.notes == []


def test_bound_triton_args_lowers_the_aws_samples_shared_memory_to_the_limit() -> None:
    args = serve_args(
        {
            "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "16777216000",
            "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "104857600",
        }
    )

    bounded = bound_triton_args(args)

    assert _shm(bounded.args) == {
        "shm-default-byte-size": str(DEFAULT_SHM_LIMIT),
        "shm-growth-byte-size": str(DEFAULT_SHM_LIMIT),
    }
    assert [line.split(" lowered")[0] for line in bounded.lowered] == [
        "python backend shm-default-byte-size",
        "python backend shm-growth-byte-size",
    ]
    assert "16777216000" in bounded.lowered[0] and str(DEFAULT_SHM_LIMIT) in bounded.lowered[0]


@pytest.mark.parametrize(
    "extra",
    [
        ["--backend-config=python,shm-default-byte-size=17179869184"],
        ["--backend-config", "python,shm-default-byte-size=17179869184"],
        ["--backend-config=shm-default-byte-size=17179869184"],  # every backend's setting
        ["--backend-conf=python,shm-default-byte-size=17179869184"],  # getopt_long takes a prefix
        ["--backend-config=python,shm-default-byte-size=17179869184GiB"],  # std::stol reads the digits
        ["--backend-config=python,shm-default-byte-size=99999999999999999999999"],  # beyond a long
    ],
    ids=["equals", "separate-value", "global", "abbreviated", "trailing-text", "overflow"],
)
def test_bound_triton_args_lowers_shared_memory_however_additional_args_ask_for_it(extra: list[str]) -> None:
    args = serve_args({"SAGEMAKER_TRITON_ADDITIONAL_ARGS": " ".join(extra)})

    bounded = bound_triton_args(args, shm_limit=4 * MiB)

    assert _shm(bounded.args)["shm-default-byte-size"] == str(4 * MiB)
    assert sum("shm-default-byte-size" in arg for arg in bounded.args) == 1
    assert [line.split(" lowered")[0] for line in bounded.lowered] == ["python backend shm-default-byte-size"]


@pytest.mark.parametrize(
    ("value", "passed"),
    [("lots", "lots"), ("-5", "-5"), ("512", "512")],
    ids=["not-a-number", "negative", "below-the-minimum"],
)
def test_bound_triton_args_passes_values_the_python_backend_refuses_itself(value: str, passed: str) -> None:
    bounded = bound_triton_args(serve_args({"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": value}))

    assert _shm(bounded.args)["shm-default-byte-size"] == passed
    assert bounded.lowered == []


@pytest.mark.parametrize(
    ("argument", "kept"),
    [
        ("--model-repository=/home/me/models", False),
        ("--model-repo=/home/me/models", False),
        ("--load-model=*", False),
        ("--log-file=/tmp/triton.log", False),
        ("--backend-directory=/opt/backends", False),
        ("--backend-config=python,shm-region-prefix-name=mine", False),
        ("--sagemaker-safe-port-range=8000-9000", False),
        ("--exit-timeout-secs=30", True),
        ("--backend-config=onnxruntime,default-max-batch-size=4", True),
        ("--unknown-option=1", True),  # tritonserver refuses it, as in the container
    ],
    ids=[
        "repository",
        "repository-abbreviated",
        "load-model",
        "log-file",
        "backend-directory",
        "region-prefix",
        "safe-port-range",
        "exit-timeout",
        "other-backend-config",
        "unknown",
    ],
)
def test_bound_triton_args_keeps_what_the_stack_must_decide(argument: str, kept: bool) -> None:
    bounded = bound_triton_args([argument])

    assert (argument in bounded.args) is kept
    assert bool(bounded.notes) is not kept


def test_bound_triton_args_leaves_grpc_and_metrics_to_be_overridden_and_says_so() -> None:
    bounded = bound_triton_args(["--allow-grpc=true", "--grpc-port=8001", "--allow-metrics=false"])

    assert bounded.args[:3] == ["--allow-grpc=true", "--grpc-port=8001", "--allow-metrics=false"]
    assert bounded.notes == ["--allow-grpc=true: stays off on the stack (it would bind a fixed port)"]


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("--cache-config=local,size=17179869184", "--cache-config=local,size=67108864"),
        ("--response-cache-byte-size=17179869184", "--response-cache-byte-size=67108864"),
        ("--sagemaker-thread-count=100000", f"--sagemaker-thread-count={MAX_THREADS}"),
        ("--model-load-thread-count=4", "--model-load-thread-count=4"),
    ],
    ids=["cache-config", "response-cache", "threads", "threads-within"],
)
def test_bound_triton_args_lowers_caches_and_thread_counts(argument: str, expected: str) -> None:
    bounded = bound_triton_args([argument])

    assert bounded.args[0] == expected
    assert bool(bounded.lowered) is (argument != expected)


@pytest.mark.parametrize("limit", [MiB - 1, 0, -1], ids=["below-1-mib", "zero", "negative"])
def test_check_shm_limit_refuses_a_ceiling_the_python_backend_would(limit: int) -> None:
    with pytest.raises(ValueError, match="at least 1 MiB"):
        check_shm_limit(limit)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_unpacked_bytes": 0}, "max_unpacked_bytes"),
        ({"max_archive_members": 0}, "max_archive_members"),
        ({"max_compression_ratio": 1}, "max_compression_ratio"),
        ({"max_instances": 0}, "max_instances"),
    ],
    ids=["bytes", "members", "ratio", "instances"],
)
def test_check_limits_names_the_limit_out_of_range(options: dict[str, int], match: str) -> None:
    settings: dict[str, int | None] = {
        "shm_limit": DEFAULT_SHM_LIMIT,
        "max_unpacked_bytes": None,
        "max_archive_members": 10,
        "max_compression_ratio": 10,
        **options,
    }
    with pytest.raises(ValueError, match=match):
        check_limits(**settings)  # type: ignore[arg-type]


def test_bound_triton_args_lowers_to_a_ceiling_of_gibibytes_too() -> None:
    bounded = bound_triton_args(
        serve_args({"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": str(3 * GiB)}), shm_limit=GiB
    )

    assert _shm(bounded.args)["shm-default-byte-size"] == str(GiB)
