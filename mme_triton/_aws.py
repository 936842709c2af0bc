"""The one way the library makes a boto3 client from the AWS injection trio every AWS-facing call takes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config

__all__ = ["make_client"]


def make_client(
    service: str,
    *,
    client: Any = None,
    boto3_session: boto3.Session | None = None,
    boto_config: Config | None = None,
    region: str | None = None,
) -> Any:
    """``client`` if given, else one from ``boto3_session`` (or a default session) and ``boto_config``."""
    if client is not None:
        return client
    if boto3_session is None:
        import boto3

        boto3_session = boto3.Session()
    session: Any = boto3_session
    kwargs: dict[str, Any] = {"config": boto_config}
    if region is not None:
        kwargs["region_name"] = region
    return session.client(service, **kwargs)
