"""BLS calls in a python model, and whether their targets are there on a multi-model endpoint.

A python model calls another model through Business Logic Scripting: ``pb_utils.InferenceRequest(
model_name="scale", ...)`` then ``.exec()``, ``await .async_exec()`` or ``.exec(decoupled=True)``. On a
multi-model endpoint the SageMaker front-end (``src/sagemaker_server.cc``, ``SageMakerMMELoadModel``)
registers the archive's directory as a model repository and loads one model from it under the
TargetModel's name: the root config's model, else the directory whose config says ``platform:
"ensemble"``, else the last directory it reads. Loading an ensemble loads its steps, under their own
directory names; nothing loads the models a python model calls. So a BLS call finds its target only when
the target is a step of the ensemble the archive serves (or, by chance, a TargetModel SageMaker has
loaded on the same instance: it is loaded under its TargetModel name, ``scale.tar.gz``), and only while
no other archive loaded on the instance has a model of the same name: with model namespacing, which the
serve script turns on, a name in two repositories is ambiguous and the call fails as "not ready".

:func:`bls_calls` finds the calls with :mod:`ast` (nothing is imported or run); :func:`check_bls`
reports, per call, the file and line and whether its target will be there.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mme_triton._sagemaker import ARCHIVE_SUFFIX
from mme_triton.model import codes
from mme_triton.model._files import read_regular
from mme_triton.model._pb import ModelConfig
from mme_triton.model.problems import Problem, Severity

__all__ = ["BlsCall", "bls_calls", "check_archive_bls", "check_bls"]

_EXECUTE = ("exec", "async_exec")
_INSTEAD = (
    "What works on a multi-model endpoint: put this model and {target} in one ensemble (build_ensemble), "
    "whose steps the front-end loads with the archive under their directory names (names no other archive "
    "of the endpoint uses: a name two loaded archives share is ambiguous and the call fails the same way), "
    "or do the work in this model"
)


@dataclass(frozen=True)
class BlsCall:
    """One ``InferenceRequest`` in a model.py."""

    line: int
    column: int
    target: str | None
    """The model name when it is written as a constant, ``None`` when it is computed at run time."""
    how: str
    """How it is executed: ``exec()``, ``async_exec()``, ``exec(decoupled=True)`` or ``executed elsewhere``
    (the request is kept and executed later)."""
    expression: str
    """The ``model_name`` argument as written."""


def _constants(tree: ast.Module) -> tuple[dict[str, str], dict[str, str]]:
    """Module-level ``NAME = "text"`` assignments, and ``self.name = "text"`` ones made once in the file."""
    names: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
            continue
        if isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node.value.value
    attributes: dict[str, set[object]] = {}
    for assign in ast.walk(tree):
        if not isinstance(assign, ast.Assign):
            continue
        for target in assign.targets:
            owner = target.value if isinstance(target, ast.Attribute) else None
            if isinstance(target, ast.Attribute) and isinstance(owner, ast.Name) and owner.id == "self":
                value = assign.value.value if isinstance(assign.value, ast.Constant) else assign
                attributes.setdefault(target.attr, set()).add(value)
    constant = {
        attr: next(iter(values))
        for attr, values in attributes.items()
        if len(values) == 1 and isinstance(next(iter(values)), str)
    }
    return names, {attr: str(value) for attr, value in constant.items()}


def _is_request(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr == "InferenceRequest") or (
        isinstance(func, ast.Name) and func.id == "InferenceRequest"
    )


def _executed(execute: ast.AST | None, attribute: ast.Attribute) -> str | None:
    if not isinstance(execute, ast.Call) or execute.func is not attribute:
        return None
    decoupled = any(
        k.arg == "decoupled" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in execute.keywords
    )
    return f"{attribute.attr}(decoupled=True)" if decoupled else f"{attribute.attr}()"


def _how(call: ast.Call, parents: Mapping[ast.AST, ast.AST]) -> str:
    """``exec()`` etc. when the request is executed where it is made, or through the variable it is
    assigned to in the same function; ``executed elsewhere`` otherwise."""
    attribute = parents.get(call)
    if isinstance(attribute, ast.Attribute) and attribute.attr in _EXECUTE:
        return _executed(parents.get(attribute), attribute) or "executed elsewhere"
    assign = attribute
    if isinstance(assign, ast.Assign) and [type(t) for t in assign.targets] == [ast.Name]:
        variable = assign.targets[0].id  # type: ignore[attr-defined]
        scope: ast.AST | None = assign
        while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = parents.get(scope)
        for node in ast.walk(scope or assign):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in _EXECUTE
                and isinstance(node.value, ast.Name)
                and node.value.id == variable
            ):
                found = _executed(parents.get(node), node)
                if found is not None:
                    return found
    return "executed elsewhere"


def bls_calls(source: bytes | str) -> list[BlsCall]:
    """Every ``InferenceRequest(...)`` in a model.py's source, in order; ``[]`` when it does not parse
    (reported as ``python-syntax-error``)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    constants, attributes = _constants(tree)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    calls: list[BlsCall] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _is_request(node):
            continue
        argument = next((k.value for k in node.keywords if k.arg == "model_name"), None)
        if argument is None and node.args:
            argument = node.args[0]
        if argument is None:
            continue
        target: str | None = None
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            target = argument.value
        elif isinstance(argument, ast.Name):
            target = constants.get(argument.id)
        elif (
            isinstance(argument, ast.Attribute)
            and isinstance(argument.value, ast.Name)
            and argument.value.id == "self"
        ):
            target = attributes.get(argument.attr)
        calls.append(
            BlsCall(node.lineno, node.col_offset + 1, target, _how(node, parents), ast.unparse(argument))
        )
    return sorted(calls, key=lambda call: (call.line, call.column))


def check_bls(files: Iterable[Path], *, steps: set[str], ensemble: str | None) -> list[Problem]:
    """One problem per BLS call in ``files`` (the model.py files of the archive's python models) whose
    target will not be there: ``steps`` are the models loaded with the archive under their own names (an
    ensemble's steps; ``ensemble`` names it), none for a single model."""
    problems: list[Problem] = []
    loaded = (
        f"only ensemble {ensemble!r} and its steps ({', '.join(sorted(steps))}) are loaded"
        if ensemble
        else "only the archive's model is loaded, under its TargetModel"
    )
    for path in files:
        try:
            source = read_regular(path)
        except OSError:
            continue
        where = f"{path.parent.parent.name}/{path.parent.name}/{path.name}"
        for call in bls_calls(source):
            if call.target is not None and call.target in steps:
                continue
            at = f"{where} line {call.line} calls"
            severity: Severity
            if call.target is None:
                code, severity = codes.BLS_TARGET_UNKNOWN, "warning"
                message = (
                    f"{at} a model named at run time ({call.expression}) through BLS "
                    f"(InferenceRequest ... {call.how}); on a multi-model endpoint {loaded}, so a call to "
                    "any other model fails at run time (\"Model '<name>' is not ready\"). "
                    + _INSTEAD.format(target="the models it calls")
                )
            elif call.target.endswith(ARCHIVE_SUFFIX):
                code, severity = codes.BLS_TARGET_TARGET_MODEL, "warning"
                message = (
                    f"{at} {call.target!r}, a TargetModel, through BLS ({call.how}): Triton has it only "
                    "while SageMaker keeps it loaded on the instance that runs this model (after a request "
                    "for it there, until it is unloaded to make room); nothing loads it for the call, which "
                    f"otherwise fails with \"Model '{call.target}' is not ready\". "
                    + _INSTEAD.format(target="the model it calls")
                )
            else:
                code, severity = codes.BLS_TARGET_NOT_LOADED, "error"
                message = (
                    f"{at} model {call.target!r} through BLS (InferenceRequest ... {call.how}); on a "
                    f"multi-model endpoint {loaded}, and nothing loads the models a python model calls: "
                    f'{call.target!r} is not there and the call fails at run time ("Model '
                    f"'{call.target}' is not ready\"). Uploading {call.target!r} as a TargetModel of its "
                    "own does not help (it is loaded as '<name>.tar.gz', and only when it is invoked). "
                    + _INSTEAD.format(target=repr(call.target))
                )
            problems.append(Problem(severity, code, message, str(path), line=call.line, column=call.column))
    return problems


def check_archive_bls(
    members: Iterable[tuple[Path, ModelConfig | None, str | None, tuple[int, ...]]], *, ensemble: str | None
) -> list[Problem]:
    """:func:`check_bls` for an archive's members ``(directory, config, backend, versions)``: the model.py
    of every version Triton loads of each python model; ``ensemble`` is the archive's model when it is an
    ensemble (its steps are then loaded under their names)."""
    from mme_triton.model._layout import Layout, model_filename, versions_to_load

    listed = list(members)
    files: list[Path] = []
    for directory, config, backend, versions in listed:
        if backend != "python":
            continue
        filename = model_filename(config, "model.py")
        if filename is None:
            continue
        for version in versions_to_load(Layout(directory, versions, config is not None), config, []):
            files.append(directory / str(version) / filename)
    steps = {directory.name for directory, *_ in listed if directory.name != ensemble} if ensemble else set()
    return check_bls(files, steps=steps, ensemble=ensemble)
