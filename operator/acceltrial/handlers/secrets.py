"""Reading a Secret a trial names, on its author's behalf: only one that opted in.

A trial author may be allowed to create trials but not to read Secrets; the operator reads them
for Prometheus credentials (``analysis.prometheus``) and notification URLs
(``spec.notifications``). So it reads only a Secret labelled ``acceltrial.dev/trial-readable:
"true"`` (docs/security.md), and the refusal names the label.
"""

from __future__ import annotations

import base64

from acceltrial.api.spec.notifications import SECRET_READABLE_LABEL
from acceltrial.kube.calls import KubeError
from acceltrial.kube.gateway import Kube


class SecretProblem(ValueError):
    """A named Secret cannot be read: missing, not opted in, without the key, or (``temporary``)
    the API server could not answer."""

    def __init__(self, message: str, temporary: bool = False) -> None:
        super().__init__(message)
        self.temporary = temporary


def readable_secret(kube: Kube, namespace: str, name: str, key: str) -> str:
    """The value of ``key`` in the Secret, when it is labelled as readable by trials."""
    where = f"Secret {namespace}/{name}"
    try:
        secret = kube.secret(namespace, name)
    except KubeError as error:
        raise SecretProblem(f"{where}: {error}", temporary=not error.permanent) from None
    if secret is None:
        raise SecretProblem(f"{where} not found")
    labels = (secret.get("metadata") or {}).get("labels") or {}
    if labels.get(SECRET_READABLE_LABEL) != "true":
        raise SecretProblem(
            f'{where} is not labelled {SECRET_READABLE_LABEL}: "true"; label it to let trials '
            "name it"
        )
    encoded = (secret.get("data") or {}).get(key)
    if encoded is None:
        raise SecretProblem(f"{where} has no key {key}")
    return base64.b64decode(encoded).decode()
