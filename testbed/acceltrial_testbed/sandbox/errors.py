"""API errors as the real server reports them: an HTTP code and a ``Status`` object.

Clients act on ``code`` and ``reason`` (kopf retries 409 Conflict, kubectl prints ``message``
and the causes' field paths), so each helper here returns the real server's pair for one case.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request the API server refuses."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(plural, group)} "{name}" not found',
        {"name": name, "group": group, "kind": plural},
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(plural, group)} "{name}" already exists',
        {"name": name, "group": group, "kind": plural},
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        {"name": name, "group": group, "kind": plural},
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid, with one cause per field as ``kubectl`` prints them."""
    subject = f"{kind}.{group}" if group else kind
    listed = [f"{c['field']}: {c['message']}" for c in causes]
    summary = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{subject} "{name}" is invalid: {summary}',
        {"name": name, "group": group, "kind": kind, "causes": causes},
    )


def unprocessable(message: str) -> ApiError:
    """422 without field causes (a JSON patch that cannot be applied)."""
    return ApiError(422, "UnprocessableEntity", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f'the body of the request was in an unknown format: "{content_type}". This local '
        "cluster reads JSON and YAML bodies only, and kubectl sends protobuf for commands such "
        "as 'kubectl create namespace' or 'kubectl create deployment': write the object to a "
        "file and use 'kubectl apply -f FILE' or 'kubectl create -f FILE' instead",
    )
