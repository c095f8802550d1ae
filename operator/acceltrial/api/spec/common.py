"""What several sections of the spec share: references to other objects and the AWS region."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from acceltrial.api.base import ApiModel, DnsLabel, ObjectName, Pattern

AwsRegion = Annotated[
    str, Pattern(r"^[a-z]{2}(-[a-z]+)+-[0-9]$", "an AWS region such as us-east-1", 32)
]


class ObjectRef(ApiModel):
    """A reference to an object in the trial's namespace."""

    name: ObjectName
    """Name of the object."""


class SecretKeyRef(ApiModel):
    """A key of a Secret in the trial's namespace."""

    name: ObjectName
    """Name of the Secret."""
    key: str = Field(min_length=1, max_length=253)
    """Key within the Secret."""


class NamespacedRef(ApiModel):
    """A reference to an object, by default in the trial's namespace."""

    name: ObjectName
    """Name of the object."""
    namespace: DnsLabel | None = None
    """Namespace of the object; defaults to the trial's namespace."""
