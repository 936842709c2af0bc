"""What a profile sends: random data that matches the config, perf_analyzer data files, arrays as given."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mme_triton as mt
from mme_triton.profile.inputs import MAX_DATA_FILE_BYTES, build_requests, input_arrays


def _model(tmp_path: Path, max_batch_size: int = 8) -> Path:
    return mt.new_python_model(
        tmp_path / "repo",
        "m",
        inputs={"IDS": ("INT64", [-1]), "TEXT": ("BYTES", [2]), "MASK": ("BOOL", [3]), "X": ("FP16", [4])},
        outputs={"Y": ("FP32", [4])},
        max_batch_size=max_batch_size,
    )


def test_random_inputs_match_the_config_batch_and_shapes(tmp_path: Path) -> None:
    requests = input_arrays(_model(tmp_path), batch_size=3, shapes={"IDS": [5]}, count=2)
    assert len(requests) == 2
    arrays = requests[0]
    assert {name: (a.shape, a.dtype.name) for name, a in arrays.items()} == {
        "IDS": ((3, 5), "int64"),
        "TEXT": ((3, 2), "object"),
        "MASK": ((3, 3), "bool"),
        "X": ((3, 4), "float16"),
    }
    assert all(isinstance(item, bytes) and len(item) == 16 for item in arrays["TEXT"].reshape(-1))
    assert not np.array_equal(requests[0]["X"], requests[1]["X"])  # one seed per request


def test_random_inputs_of_a_model_without_batching_have_no_batch_dim(tmp_path: Path) -> None:
    arrays = input_arrays(_model(tmp_path, max_batch_size=0))[0]
    assert arrays["IDS"].shape == (1,) and arrays["X"].shape == (4,)


def test_build_requests_encodes_binary_bodies_once(tmp_path: Path) -> None:
    request = build_requests(_model(tmp_path), count=1)[0]
    assert request.content_type.startswith("application/vnd.sagemaker-triton.binary+json")
    assert request.json_header_size is not None and request.json_header_size < len(request.body)
    decoded = request.body[: request.json_header_size].decode()
    assert '"name":"TEXT"' in decoded and '"datatype":"BYTES"' in decoded


def test_data_file_from_perf_analyzer_data_plays_back_per_batch(tmp_path: Path) -> None:
    model = _model(tmp_path)
    rows = {
        "IDS": np.arange(8, dtype=np.int64).reshape(4, 2),
        "TEXT": np.array([[b"a", b"b"], [b"c", b"d"], [b"e", b"f"], [b"\xff", b"h"]], dtype=object),
        "MASK": np.ones((4, 3), dtype=bool),
        "X": np.full((4, 4), 0.5, dtype=np.float16),
    }
    data = mt.perf_analyzer_data(rows, tmp_path / "data.json", model_dir=model)

    requests = input_arrays(model, data, batch_size=2)

    assert len(requests) == 2
    np.testing.assert_array_equal(requests[1]["IDS"], rows["IDS"][2:])
    assert requests[1]["TEXT"].tolist() == [[b"e", b"f"], [b"\xff", b"h"]]  # b64 BYTES read back
    assert requests[0]["X"].dtype == np.float16 and requests[0]["MASK"].all()


def test_arrays_are_sent_as_given(tmp_path: Path) -> None:
    arrays = {"X": np.zeros((2, 4), np.float16)}
    assert input_arrays(_model(tmp_path), arrays) == [arrays]
    assert input_arrays(_model(tmp_path / "2"), [arrays, arrays]) == [arrays, arrays]


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("not json", "cannot read perf_analyzer data"),
        ('{"data": []}', "at least one entry"),
        ('{"data": [{"NOPE": [1]}]}', "does not have"),
        ('{"data": [{"IDS": [1, 2]}]}', "variable dims"),
    ],
    ids=["not-json", "empty", "unknown-input", "no-shape"],
)
def test_data_file_problems_are_reported(tmp_path: Path, content: str, error: str) -> None:
    path = tmp_path / "data.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=error):
        input_arrays(_model(tmp_path), path)


def test_data_file_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as handle:
        handle.truncate(MAX_DATA_FILE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(ValueError, match="over the"):
        input_arrays(_model(tmp_path), path)


@pytest.mark.parametrize("batch_size", [0, 9], ids=["zero", "over-max"])
def test_batch_size_outside_the_model_is_refused(tmp_path: Path, batch_size: int) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        input_arrays(_model(tmp_path), batch_size=batch_size)


def test_inputs_of_another_kind_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="inputs takes"):
        input_arrays(_model(tmp_path), 42)


def test_random_inputs_of_an_encoder_keep_to_values_it_accepts(tmp_path: Path) -> None:
    """attention_mask is all ones, token_type_ids the first type when no size is recorded (every
    encoder has one), input_ids the default range without a recorded vocabulary."""
    model = mt.new_python_model(
        tmp_path / "repo",
        "encoder",
        inputs={name: ("INT64", [-1]) for name in ("input_ids", "attention_mask", "token_type_ids")},
        outputs={"Y": ("FP32", [-1])},
        max_batch_size=8,
    )
    requests = input_arrays(
        model,
        batch_size=4,
        shapes={name: [32] for name in ("input_ids", "attention_mask", "token_type_ids")},
        count=3,
    )
    for arrays in requests:
        assert (arrays["attention_mask"] == 1).all() and (arrays["token_type_ids"] == 0).all()
        assert arrays["input_ids"].min() >= 0 and arrays["input_ids"].max() < 100
    assert len({arrays["input_ids"].tobytes() for arrays in requests}) == 3
