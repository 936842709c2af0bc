"""Names Triton's python backend can take, and answers put back under the TargetModel."""

from __future__ import annotations

import json

import pytest

from mme_triton.local.route.names import is_shell_safe, rename_in_response, triton_model_name, user_message


@pytest.mark.parametrize(
    ("target_model", "safe"),
    [
        ("linear.tar.gz", True),
        ("resnet-v2_1.tar.gz", True),
        ("my model.tar.gz", False),
        ("v2/linear.tar.gz", False),
        ("a;touch x.tar.gz", False),
        ("$(id).tar.gz", False),
    ],
    ids=["plain", "dash-underscore", "space", "slash", "semicolon", "substitution"],
)
def test_triton_model_name_keeps_safe_names_and_aliases_the_others(target_model: str, safe: bool) -> None:
    name = triton_model_name(target_model)

    assert is_shell_safe(name)
    assert (name == target_model) is safe


def test_triton_model_name_gives_two_names_two_aliases() -> None:
    # "a b" and "a/b" both become "a_b...", and neither may take the name of the real "a_b.tar.gz"
    aliases = {triton_model_name(name) for name in ("a b.tar.gz", "a/b.tar.gz", "a_b.tar.gz")}

    assert len(aliases) == 3
    assert triton_model_name("a b.tar.gz") == triton_model_name("a b.tar.gz")


def test_rename_in_response_renames_a_json_answer() -> None:
    alias = triton_model_name("my model.tar.gz")
    body = json.dumps({"model_name": alias, "model_version": "1", "outputs": []}, separators=(",", ":"))

    renamed, content_type = rename_in_response(body.encode(), "application/json", alias, "my model.tar.gz")

    assert json.loads(renamed)["model_name"] == "my model.tar.gz"
    assert content_type == "application/json"


def test_rename_in_response_keeps_the_binary_header_size_true() -> None:
    alias = triton_model_name("my model.tar.gz")
    header = json.dumps(
        {"model_name": alias, "outputs": [{"name": "Y", "parameters": {"binary_data_size": 4}}]}
    )
    header = header.replace(" ", "")
    body = header.encode() + b"\x01\x02\x03\x04"
    content_type = f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(header)}"

    renamed, renamed_type = rename_in_response(body, content_type, alias, "my model.tar.gz")

    size = int(renamed_type.rsplit("=", 1)[1])
    assert json.loads(renamed[:size])["model_name"] == "my model.tar.gz"
    assert renamed[size:] == b"\x01\x02\x03\x04"


def test_user_message_replaces_the_longest_match_first() -> None:
    message = "unable to load /scratch/models/ab12/model/linear/1/model.onnx from /scratch"
    replacements = [("/scratch", "<stack scratch>"), ("/scratch/models/ab12/model/", "linear.tar.gz:")]

    assert user_message(message, replacements) == (
        "unable to load linear.tar.gz:linear/1/model.onnx from <stack scratch>"
    )
