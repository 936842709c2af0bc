"""How the endpoint stage talks to SageMaker's control plane and Application Auto Scaling: retries."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from botocore.config import Config

__all__ = ["CONTROL_PLANE_MAX_ATTEMPTS", "control_plane_config"]

#: Attempts botocore makes per control-plane call (the first one included).
CONTROL_PLANE_MAX_ATTEMPTS = 8


def control_plane_config() -> Config:
    """The botocore ``Config`` the endpoint stage's clients start from (``boto_config`` is merged over it).

    botocore's ``standard`` retry mode retries throttling, 5xx answers and dropped connections with
    exponential backoff and full jitter (capped at 20 s). SageMaker's control plane throttles routinely,
    so the stage allows more attempts than botocore's default of 3.
    """
    from botocore.config import Config

    return Config(
        retries={"mode": "standard", "total_max_attempts": CONTROL_PLANE_MAX_ATTEMPTS},
        connect_timeout=10,
        read_timeout=60,
    )
