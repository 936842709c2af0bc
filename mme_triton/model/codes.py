"""Every problem code validation can report, in one table.

Codes are stable: tests, CI filters and docs/validation.md rely on them. Each constant below is the code
string itself, so ``grep -rn CONFIG_SYNTAX`` and ``grep -rn config-syntax`` both find every use.
:data:`CODES` maps each code to its severity and a one-line meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mme_triton.model.problems import Severity

__all__ = ["CODES", "CodeInfo"]


@dataclass(frozen=True)
class CodeInfo:
    """What a problem code means: its severity and a one-line summary."""

    severity: Severity
    summary: str


# --- hygiene ---------------------------------------------------------------------------------------
SYMLINK: Final = "symlink"
SPECIAL_FILE: Final = "special-file"
JUNK_FILE: Final = "junk-file"
UNREADABLE: Final = "unreadable"

# --- config.pbtxt parsing --------------------------------------------------------------------------
CONFIG_MISSING: Final = "config-missing"
PYTHON_CONFIG_MISSING: Final = "python-config-missing"
CONFIG_ENCODING: Final = "config-encoding"
CONFIG_SYNTAX: Final = "config-syntax"
CONFIG_UNKNOWN_FIELD: Final = "config-unknown-field"
CONFIG_INVALID_VALUE: Final = "config-invalid-value"
CONFIG_NAME_MISMATCH: Final = "config-name-mismatch"
COMPONENT_NAME_MISMATCH: Final = "component-name-mismatch"

# --- platform / backend and layout -----------------------------------------------------------------
PLATFORM_MISSING: Final = "platform-missing"
PLATFORM_UNKNOWN: Final = "platform-unknown"
BACKEND_UNKNOWN: Final = "backend-unknown"
PLATFORM_BACKEND_MISMATCH: Final = "platform-backend-mismatch"
VERSION_MISSING: Final = "version-missing"
VERSION_DIRECTORY_IGNORED: Final = "version-directory-ignored"
VERSION_POLICY_UNSATISFIED: Final = "version-policy-unsatisfied"
MODEL_FILE_MISSING: Final = "model-file-missing"
PYTHON_MODEL_CLASS_MISSING: Final = "python-model-class-missing"
PYTHON_SYNTAX_ERROR: Final = "python-syntax-error"
PYTHON_ENV_MISSING: Final = "python-env-missing"
PYTHON_ENV_OUTSIDE_MODEL: Final = "python-env-outside-model"
PYTHON_ENV_INVALID: Final = "python-env-invalid"
PYTHON_ENV_LARGE: Final = "python-env-large"
PYTHON_ENV_PYTHON_MISMATCH: Final = "python-env-python-mismatch"
BLS_TARGET_NOT_LOADED: Final = "bls-target-not-loaded"
BLS_TARGET_TARGET_MODEL: Final = "bls-target-target-model"
BLS_TARGET_UNKNOWN: Final = "bls-target-unknown"

# --- config semantics ------------------------------------------------------------------------------
MAX_BATCH_SIZE_INVALID: Final = "max-batch-size-invalid"
TENSOR_NAME_MISSING: Final = "tensor-name-missing"
TENSOR_NAME_DUPLICATE: Final = "tensor-name-duplicate"
DATATYPE_INVALID: Final = "datatype-invalid"
DIMS_INVALID: Final = "dims-invalid"
RESHAPE_INVALID: Final = "reshape-invalid"
DYNAMIC_BATCHING_WITHOUT_BATCHING: Final = "dynamic-batching-without-batching"
PREFERRED_BATCH_SIZE_INVALID: Final = "preferred-batch-size-invalid"
INSTANCE_GROUP_INVALID: Final = "instance-group-invalid"

# --- backend parameters ----------------------------------------------------------------------------
INTER_OP_THREADS_IGNORED: Final = "inter-op-threads-ignored"

# --- ensembles -------------------------------------------------------------------------------------
ENSEMBLE_SCHEDULING_MISSING: Final = "ensemble-scheduling-missing"
ENSEMBLE_SCHEDULING_UNEXPECTED: Final = "ensemble-scheduling-unexpected"
ENSEMBLE_STEP_MODEL_MISSING: Final = "ensemble-step-model-missing"
ENSEMBLE_CYCLE: Final = "ensemble-cycle"
ENSEMBLE_INPUT_MAP_INVALID: Final = "ensemble-input-map-invalid"
ENSEMBLE_OUTPUT_MAP_INVALID: Final = "ensemble-output-map-invalid"
ENSEMBLE_OUTPUT_UNPRODUCED: Final = "ensemble-output-unproduced"
ENSEMBLE_TENSOR_UNUSED: Final = "ensemble-tensor-unused"
ENSEMBLE_DATATYPE_MISMATCH: Final = "ensemble-datatype-mismatch"
ENSEMBLE_SHAPE_MISMATCH: Final = "ensemble-shape-mismatch"
ENSEMBLE_BATCH_SIZE_MISMATCH: Final = "ensemble-batch-size-mismatch"
ENSEMBLE_NOT_DETECTED: Final = "ensemble-not-detected"
ENSEMBLE_ARCHIVE_AMBIGUOUS: Final = "ensemble-archive-ambiguous"

# --- ONNX graph against config ---------------------------------------------------------------------
ONNX_CHECK_SKIPPED: Final = "onnx-check-skipped"
ONNX_UNREADABLE: Final = "onnx-unreadable"
ONNX_EXTERNAL_DATA_MISSING: Final = "onnx-external-data-missing"
ONNX_TENSOR_MISSING: Final = "onnx-tensor-missing"
ONNX_DATATYPE_MISMATCH: Final = "onnx-datatype-mismatch"
ONNX_DATATYPE_UNSUPPORTED: Final = "onnx-datatype-unsupported"
ONNX_RANK_MISMATCH: Final = "onnx-rank-mismatch"
ONNX_DIM_MISMATCH: Final = "onnx-dim-mismatch"
ONNX_BATCH_DIM_FIXED: Final = "onnx-batch-dim-fixed"

# --- the embedded stack (validate_model(..., local_stack=True)) -------------------------------------
LOCAL_STACK_UNSUPPORTED: Final = "local-stack-unsupported"


CODES: Final[dict[str, CodeInfo]] = {
    SYMLINK: CodeInfo("error", "a symbolic link inside the model directory"),
    SPECIAL_FILE: CodeInfo("error", "a FIFO, socket or device file inside the model directory"),
    JUNK_FILE: CodeInfo("warning", "an editor/OS/Python cache entry that packaging leaves out"),
    UNREADABLE: CodeInfo("error", "a file or directory inside the model cannot be read"),
    CONFIG_MISSING: CodeInfo("error", "no config.pbtxt, and Triton cannot auto-complete one"),
    PYTHON_CONFIG_MISSING: CodeInfo(
        "warning", "a python model without config.pbtxt: Triton loads it, with no inputs or outputs"
    ),
    CONFIG_ENCODING: CodeInfo("warning", "config.pbtxt is not UTF-8 (Triton reads it byte for byte)"),
    CONFIG_SYNTAX: CodeInfo("error", "config.pbtxt is not valid protobuf text format"),
    CONFIG_UNKNOWN_FIELD: CodeInfo("error", "config.pbtxt names a field ModelConfig does not have"),
    CONFIG_INVALID_VALUE: CodeInfo("error", "a value in config.pbtxt has the wrong type or enum name"),
    CONFIG_NAME_MISMATCH: CodeInfo("warning", "config `name` differs from the directory name"),
    COMPONENT_NAME_MISMATCH: CodeInfo("error", "an ensemble step's config `name` differs from its directory"),
    PLATFORM_MISSING: CodeInfo("error", "neither platform nor backend set, and no model file to infer it"),
    PLATFORM_UNKNOWN: CodeInfo("error", "`platform` is not one Triton knows"),
    BACKEND_UNKNOWN: CodeInfo("warning", "`backend` is not shipped with Triton and not in the model"),
    PLATFORM_BACKEND_MISMATCH: CodeInfo("error", "`platform` and `backend` name different backends"),
    VERSION_MISSING: CodeInfo("error", "no numeric version directory, or none the version policy selects"),
    VERSION_DIRECTORY_IGNORED: CodeInfo("warning", "a directory Triton will not load as a version"),
    VERSION_POLICY_UNSATISFIED: CodeInfo("warning", "version_policy asks for versions that do not exist"),
    MODEL_FILE_MISSING: CodeInfo(
        "error", "a version directory lacks the file the backend loads, or its name points outside"
    ),
    PYTHON_MODEL_CLASS_MISSING: CodeInfo("error", "model.py does not define class TritonPythonModel"),
    PYTHON_SYNTAX_ERROR: CodeInfo("error", "model.py does not compile (a SyntaxError at a file and line)"),
    PYTHON_ENV_MISSING: CodeInfo(
        "error", "EXECUTION_ENV_PATH points at nothing in the model (a wrong name, a relative path, '..')"
    ),
    PYTHON_ENV_OUTSIDE_MODEL: CodeInfo(
        "warning", "EXECUTION_ENV_PATH is an absolute path: the image must have it, the archive does not"
    ),
    PYTHON_ENV_INVALID: CodeInfo(
        "error", "the environment is no gzip/tar archive, has no bin/activate, or a member leaves it"
    ),
    PYTHON_ENV_LARGE: CodeInfo("warning", "the environment archive is unpacked again on every cold load"),
    PYTHON_ENV_PYTHON_MISMATCH: CodeInfo(
        "error", "the environment's Python is not the one the image's python backend stub runs"
    ),
    BLS_TARGET_NOT_LOADED: CodeInfo(
        "error", "model.py calls a model through BLS that the archive does not load"
    ),
    BLS_TARGET_TARGET_MODEL: CodeInfo(
        "warning", "model.py calls a TargetModel through BLS: there only while SageMaker has it loaded"
    ),
    BLS_TARGET_UNKNOWN: CodeInfo("warning", "model.py calls a model named at run time through BLS"),
    MAX_BATCH_SIZE_INVALID: CodeInfo("error", "max_batch_size is negative"),
    TENSOR_NAME_MISSING: CodeInfo("error", "an input or output has no name"),
    TENSOR_NAME_DUPLICATE: CodeInfo("error", "two inputs or two outputs share a name"),
    DATATYPE_INVALID: CodeInfo("error", "an input or output has no data_type, or one Triton does not know"),
    DIMS_INVALID: CodeInfo("error", "dims missing, 0, or below -1"),
    RESHAPE_INVALID: CodeInfo("error", "reshape does not hold the same elements as dims"),
    DYNAMIC_BATCHING_WITHOUT_BATCHING: CodeInfo(
        "warning", "dynamic_batching with max_batch_size 0 does nothing"
    ),
    PREFERRED_BATCH_SIZE_INVALID: CodeInfo("error", "preferred_batch_size not in 1..max_batch_size"),
    INSTANCE_GROUP_INVALID: CodeInfo("error", "instance_group count negative, or gpus with KIND_CPU"),
    INTER_OP_THREADS_IGNORED: CodeInfo(
        "warning", "inter_op_thread_count with sequential execution: ONNX Runtime ignores it"
    ),
    ENSEMBLE_SCHEDULING_MISSING: CodeInfo("error", "platform ensemble without ensemble_scheduling"),
    ENSEMBLE_SCHEDULING_UNEXPECTED: CodeInfo("error", "ensemble_scheduling on a model that is no ensemble"),
    ENSEMBLE_STEP_MODEL_MISSING: CodeInfo("error", "an ensemble step names a model not in the repository"),
    ENSEMBLE_CYCLE: CodeInfo("error", "ensembles that contain each other"),
    ENSEMBLE_INPUT_MAP_INVALID: CodeInfo("error", "a step's input_map does not fit the model or the flow"),
    ENSEMBLE_OUTPUT_MAP_INVALID: CodeInfo("error", "a step's output_map does not fit the model or the flow"),
    ENSEMBLE_OUTPUT_UNPRODUCED: CodeInfo("error", "an ensemble output no step produces"),
    ENSEMBLE_TENSOR_UNUSED: CodeInfo("error", "an ensemble input or step output nothing reads"),
    ENSEMBLE_DATATYPE_MISMATCH: CodeInfo("error", "one ensemble tensor with two different datatypes"),
    ENSEMBLE_SHAPE_MISMATCH: CodeInfo("error", "one ensemble tensor with two incompatible shapes"),
    ENSEMBLE_BATCH_SIZE_MISMATCH: CodeInfo("error", "a step model's max_batch_size below the ensemble's"),
    ENSEMBLE_NOT_DETECTED: CodeInfo(
        "error", 'SageMaker cannot spot the ensemble: no `platform: "ensemble"` text'
    ),
    ENSEMBLE_ARCHIVE_AMBIGUOUS: CodeInfo("error", "a step model also reads as an ensemble to SageMaker"),
    ONNX_CHECK_SKIPPED: CodeInfo("warning", "the `onnx` package is missing, the graph was not checked"),
    ONNX_UNREADABLE: CodeInfo("error", "model.onnx is not a readable ONNX model"),
    ONNX_EXTERNAL_DATA_MISSING: CodeInfo("error", "an external-data file the graph names is missing"),
    ONNX_TENSOR_MISSING: CodeInfo("error", "a config input/output the graph does not have"),
    ONNX_DATATYPE_MISMATCH: CodeInfo("error", "config data_type differs from the graph's element type"),
    ONNX_DATATYPE_UNSUPPORTED: CodeInfo("error", "a graph tensor type Triton cannot serve"),
    ONNX_RANK_MISMATCH: CodeInfo("error", "config rank (with batch dim) differs from the graph's"),
    ONNX_DIM_MISMATCH: CodeInfo("error", "a fixed dim in config differs from the graph's"),
    ONNX_BATCH_DIM_FIXED: CodeInfo("error", "max_batch_size > 0 but the graph's first dim is fixed"),
    LOCAL_STACK_UNSUPPORTED: CodeInfo(
        "warning", "the embedded stack (CPU only) cannot run this backend; what runs instead"
    ),
}
