"""The sandbox's HTTP API server (aiohttp): routing, request decoding, discovery, watch streams.

Why not kmock: the plan was a thin subclass of ``kmock.KubernetesEmulator`` (kmock 0.8). Its
emulator keeps objects as plain merged dicts and its request parser, list, watch, create and
update paths are each missing what this project needs (resourceVersion, 201 on create, PUT,
selectors, watch resumption and 410, status separation, conflicts, the namespaces path). A
subclass would have replaced every one of those paths and its request parser, keeping only the
discovery scaffold, and tied us to kmock's private internals. So the server is written directly
on aiohttp (which kmock itself builds on), with the semantics in
:mod:`acceltrial_testbed.sandbox.store`.

This module only translates HTTP to store calls: the paths of the real API
(``/api/v1/namespaces/<ns>/<plural>/<name>/<subresource>``), the patch content types, query
parameters (``labelSelector``, ``fieldSelector``, ``resourceVersion``, ``timeoutSeconds``,
``watch``, ``fieldValidation``, ``propagationPolicy``) and ``Status`` errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from acceltrial_testbed.sandbox import errors, managed_fields, openapi, patching, tables
from acceltrial_testbed.sandbox.errors import ApiError
from acceltrial_testbed.sandbox.jobs import pod_log
from acceltrial_testbed.sandbox.resources import (
    Registry,
    ResourceType,
    api_group,
    api_group_list,
    api_resource_list,
    api_versions,
)
from acceltrial_testbed.sandbox.selectors import Selector, SelectorError
from acceltrial_testbed.sandbox.store import Object, Store

logger = logging.getLogger(__name__)

_BOOKMARK_EVERY = 60.0  # seconds of quiet before a watch gets a bookmark, as the real server
VERSION_INFO = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0-acceltrial-sandbox",
    "gitCommit": "",
    "gitTreeState": "clean",
    "buildDate": "2025-04-23T00:00:00Z",
    "goVersion": "go1.24",
    "compiler": "gc",
    "platform": "linux/amd64",
}


@dataclass(frozen=True)
class Target:
    """What a resource path names."""

    resource: ResourceType
    namespace: str | None  # None: across all namespaces (or a cluster-scoped kind)
    name: str | None
    subresource: str | None


def build_app(store: Store) -> web.Application:
    app = web.Application(client_max_size=16 * 1024 * 1024)
    api = ApiHandler(store)
    app.router.add_route("*", "/{path:.*}", api.dispatch)
    return app


class ApiHandler:
    """Routes every request; one instance per server."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.registry: Registry = store.registry
        self._encoded: dict[tuple[str, str, str], bytes] = {}

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except ApiError as error:
            return _json(error.status(), error.code)
        except SelectorError as error:
            return _json(errors.bad_request(str(error)).status(), 400)
        except Exception as error:
            # A bug here must reach the client as a Status, as the real server's 500s do, and
            # be logged with its traceback for whoever runs the sandbox.
            logger.exception("internal error serving %s %s", request.method, request.path)
            status = ApiError(500, "InternalError", f"internal error: {error!r}").status()
            return _json(status, 500)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        fixed = self._fixed_document(parts)
        if fixed is not None:
            return _json(fixed)
        target = self._target(parts)
        if target is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return await self._serve(request, target)

    def _fixed_document(self, parts: list[str]) -> Any:
        """Discovery, version and OpenAPI documents."""
        documents: dict[tuple[str, ...], Callable[[], Any]] = {
            (): lambda: {"paths": ["/api", "/apis", "/version", "/openapi/v2", "/openapi/v3"]},
            ("version",): lambda: VERSION_INFO,
            ("healthz",): lambda: "ok",
            ("readyz",): lambda: "ok",
            ("livez",): lambda: "ok",
            ("api",): api_versions,
            ("apis",): lambda: api_group_list(self.registry),
            ("openapi", "v2"): lambda: openapi.v2(self.registry),
            ("openapi", "v3"): lambda: openapi.v3_index(self.registry),
        }
        key = tuple(parts)
        if key in documents:
            return documents[key]()
        if len(parts) == 2 and parts[0] == "api":
            return api_resource_list(self.registry, "", parts[1]) or _missing()
        if len(parts) == 2 and parts[0] == "apis":
            return api_group(self.registry, parts[1]) or _missing()
        if len(parts) == 3 and parts[0] == "apis":
            return api_resource_list(self.registry, parts[1], parts[2]) or _missing()
        if parts[:2] == ["openapi", "v3"] and len(parts) > 2:
            return openapi.v3_group_version(self.registry, "/".join(parts[2:])) or _missing()
        return None

    def _target(self, parts: list[str]) -> Target | None:
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and self.registry.find(group, version, rest[2]) is not None
        ):
            namespace, rest = rest[1], rest[2:]
        resource = self.registry.find(group, version, rest[0])
        if resource is None or len(rest) > 3:
            return None
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        a_pod_log = subresource == "log" and resource.kind == "Pod"
        if subresource is not None and subresource not in resource.subresources and not a_pod_log:
            return None
        return Target(resource, namespace if resource.namespaced else None, name, subresource)

    async def _serve(self, request: web.Request, target: Target) -> web.StreamResponse:
        method = request.method
        if target.name is None and method == "GET" and _flag(request.query.get("watch")):
            return await self._watch(request, target)
        handlers: dict[tuple[bool, str], Callable[[web.Request, Target], Awaitable[Any]]] = {
            (False, "GET"): self._list,
            (False, "POST"): self._create,
            (False, "DELETE"): self._delete_collection,
            (True, "GET"): self._get,
            (True, "PUT"): self._replace,
            (True, "PATCH"): self._patch,
            (True, "DELETE"): self._delete,
        }
        handler = handlers.get((target.name is not None, method))
        if handler is None:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on this path")
        response: web.StreamResponse = await handler(request, target)
        return response

    # Reading

    def _selector(self, request: web.Request, target: Target) -> Selector:
        return Selector.parse(
            request.query.get("labelSelector", ""),
            request.query.get("fieldSelector", ""),
            target.resource.kind,
        )

    async def _list(self, request: web.Request, target: Target) -> web.StreamResponse:
        items, version = self.store.list_objects(
            target.resource, target.namespace, self._selector(request, target)
        )
        if tables.wants_table(request.headers.get("Accept", "")):
            return _json(tables.table(target.resource, items, version, self.store.clock()))
        return _json(
            {
                "kind": f"{target.resource.kind}List",
                "apiVersion": target.resource.api_version,
                "metadata": {"resourceVersion": str(version)},
                "items": items,
            }
        )

    async def _get(self, request: web.Request, target: Target) -> web.StreamResponse:
        assert target.name is not None
        obj = self.store.get(target.resource, target.namespace or "", target.name)
        if target.subresource == "scale":
            return _json(_scale(obj))
        if target.subresource == "log":
            tail = request.query.get("tailLines")
            return web.Response(text=pod_log(obj, int(tail) if tail else None))
        if tables.wants_table(request.headers.get("Accept", "")):
            return _json(
                tables.table(target.resource, [obj], self.store.version, self.store.clock())
            )
        return _json(obj)

    async def _watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        since_text = request.query.get("resourceVersion", "")
        try:
            since = int(since_text) if since_text not in ("", "0") else None
            timeout = float(request.query.get("timeoutSeconds") or 1800)
        except ValueError as error:
            raise errors.bad_request(
                f"invalid resourceVersion or timeoutSeconds: {error}"
            ) from error
        selector = self._selector(request, target)
        as_table = tables.wants_table(request.headers.get("Accept", ""))
        bookmarks = _flag(request.query.get("allowWatchBookmarks"))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        try:
            watch = self.store.watch(
                target.resource,
                target.namespace,
                selector,
                since,
                mark_initial_end=_flag(request.query.get("sendInitialEvents")),
            )
        except ApiError as error:
            await _send(response, {"type": "ERROR", "object": error.status()})
            return response
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while (left := deadline - loop.time()) > 0:
                try:
                    first = await asyncio.wait_for(watch.queue.get(), min(left, _BOOKMARK_EVERY))
                except TimeoutError:
                    # Quiet for a while (or ending): a bookmark tells the client the current
                    # version, so it resumes from there instead of an expired one.
                    if bookmarks:
                        await _send(response, self._bookmark(target))
                    continue
                # Send what queued up meanwhile in one write: a burst of changes then costs
                # one syscall per watcher instead of one per event.
                events = [first]
                while not watch.queue.empty():
                    events.append(watch.queue.get_nowait())
                await response.write(b"".join(self._encode(e, target, as_table) for e in events))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unwatch(watch)
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    def _bookmark(self, target: Target) -> Object:
        return {"type": "BOOKMARK", "object": self.store.bookmark(target.resource)}

    def _encode(self, event: tuple[str, Object], target: Target, as_table: bool) -> bytes:
        kind, obj = event
        if as_table and kind != "BOOKMARK":
            table = tables.table(target.resource, [obj], self.store.version, self.store.clock())
            return json.dumps({"type": kind, "object": table}).encode() + b"\n"
        # Every watcher of a change sends the same bytes: encode each (version, type) once.
        meta = obj["metadata"]
        key = (meta.get("resourceVersion", ""), meta.get("uid", obj.get("kind", "")), kind)
        encoded = self._encoded.get(key)
        if encoded is None:
            if len(self._encoded) > 4096:
                self._encoded.clear()
            encoded = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
            self._encoded[key] = encoded
        return encoded

    # Writing

    async def _create(self, request: web.Request, target: Target) -> web.StreamResponse:
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be an object")
        obj, warnings = self.store.create(
            target.resource,
            target.namespace or "",
            body,
            strict=_strict(request),
            dry_run=_dry_run(request),
        )
        return _json(obj, 201, warnings)

    async def _replace(self, request: web.Request, target: Target) -> web.StreamResponse:
        assert target.name is not None
        body = await _body(request)
        if target.subresource == "scale":
            replicas = (body.get("spec") or {}).get("replicas", 0)
            return self._scale_to(target, replicas)
        obj, warnings = self.store.update(
            target.resource,
            target.namespace or "",
            target.name,
            self._stamping(request, target, lambda _current: body),
            subresource=target.subresource,
            strict=_strict(request),
            dry_run=_dry_run(request),
        )
        return _json(obj, 200, warnings)

    async def _patch(self, request: web.Request, target: Target) -> web.StreamResponse:
        assert target.name is not None
        content_type = request.content_type
        raw = await request.read()
        try:
            patch = yaml.safe_load(raw) if content_type.endswith("yaml") else json.loads(raw)
        except (ValueError, yaml.YAMLError) as error:
            raise errors.bad_request(f"the patch is not valid: {error}") from error
        apply = _patch_function(content_type, patch)
        if content_type == "application/apply-patch+yaml":
            return self._server_side_apply(request, target, patch)
        if target.subresource == "scale":
            current = _scale(self.store.get(target.resource, target.namespace or "", target.name))
            replicas = _patched(apply, current, patch).get("spec", {}).get("replicas", 0)
            return self._scale_to(target, replicas)
        obj, warnings = self.store.update(
            target.resource,
            target.namespace or "",
            target.name,
            self._stamping(request, target, lambda current: _patched(apply, current, patch)),
            subresource=target.subresource,
            strict=_strict(request),
            dry_run=_dry_run(request),
        )
        return _json(obj, 200, warnings)

    def _stamping(
        self, request: web.Request, target: Target, change: Callable[[Object], Object]
    ) -> Callable[[Object], Object]:
        who = managed_fields.manager(request)
        return managed_fields.stamping(
            target.resource, change, who, target.subresource, self.store.clock
        )

    def _server_side_apply(
        self, request: web.Request, target: Target, patch: Any
    ) -> web.StreamResponse:
        """Server-side apply, simplified: create when missing, else a strategic merge of the
        applied configuration (fields it no longer names are kept; no managedFields)."""
        assert target.name is not None
        if not isinstance(patch, dict):
            raise errors.bad_request("an apply patch must be an object")
        try:
            obj, warnings = self.store.update(
                target.resource,
                target.namespace or "",
                target.name,
                lambda current: _patched(patching.strategic_merge_patch, current, patch),
                subresource=target.subresource,
                strict=_strict(request),
                dry_run=_dry_run(request),
            )
        except ApiError as error:
            if error.code != 404 or target.subresource:
                raise
            obj, warnings = self.store.create(
                target.resource,
                target.namespace or "",
                patch,
                strict=_strict(request),
                dry_run=_dry_run(request),
            )
            return _json(obj, 201, warnings)
        return _json(obj, 200, warnings)

    def _scale_to(self, target: Target, replicas: Any) -> web.StreamResponse:
        assert target.name is not None
        if not isinstance(replicas, int) or replicas < 0:
            raise errors.bad_request("spec.replicas must be a non-negative integer")
        obj, _ = self.store.update(
            target.resource,
            target.namespace or "",
            target.name,
            lambda current: patching.merge_patch(current, {"spec": {"replicas": replicas}}),
        )
        return _json(_scale(obj))

    async def _delete(self, request: web.Request, target: Target) -> web.StreamResponse:
        assert target.name is not None
        options = await _body(request) if request.can_read_body else {}
        options = options if isinstance(options, dict) else {}
        propagation = options.get("propagationPolicy") or request.query.get(
            "propagationPolicy", "Background"
        )
        precondition = (options.get("preconditions") or {}).get("resourceVersion")
        if _dry_run(request) or options.get("dryRun") == ["All"]:
            return _json(self.store.get(target.resource, target.namespace or "", target.name))
        obj = self.store.delete(
            target.resource,
            target.namespace or "",
            target.name,
            propagation=propagation,
            precondition_version=precondition,
        )
        return _json(obj)

    async def _delete_collection(self, request: web.Request, target: Target) -> web.StreamResponse:
        items, _ = self.store.list_objects(
            target.resource, target.namespace, self._selector(request, target)
        )
        for item in items:
            meta = item["metadata"]
            self.store.delete(target.resource, meta.get("namespace", ""), meta["name"])
        return _json(
            {
                "kind": f"{target.resource.kind}List",
                "apiVersion": target.resource.api_version,
                "metadata": {"resourceVersion": str(self.store.version)},
                "items": items,
            }
        )


PatchFunction = Callable[[Any, Any], Any]


def _patch_function(content_type: str, patch: Any) -> PatchFunction:
    functions: dict[str, PatchFunction] = {
        "application/merge-patch+json": patching.merge_patch,
        "application/json-patch+json": patching.json_patch,
        "application/strategic-merge-patch+json": patching.strategic_merge_patch,
        "application/apply-patch+yaml": patching.strategic_merge_patch,
    }
    if content_type not in functions:
        raise errors.unsupported_media_type(content_type)
    return functions[content_type]


def _patched(function: PatchFunction, current: Object, patch: Any = None) -> Object:
    try:
        result = function(current, patch)
    except patching.PatchError as error:
        raise errors.unprocessable(str(error)) from error
    except patching.PatchFormatError as error:
        raise errors.bad_request(str(error)) from error
    if not isinstance(result, dict):
        raise errors.unprocessable("the patched object is not an object")
    return result


def _scale(obj: Object) -> Object:
    """The autoscaling/v1 Scale view of a Deployment or ReplicaSet."""
    meta = obj["metadata"]
    selector = (obj.get("spec", {}).get("selector") or {}).get("matchLabels") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta
        },
        "spec": {"replicas": obj.get("spec", {}).get("replicas", 1)},
        "status": {
            "replicas": obj.get("status", {}).get("replicas", 0),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(selector.items())),
        },
    }


async def _body(request: web.Request) -> Any:
    if request.content_type not in _BODY_TYPES:
        # Protobuf and CBOR are not served; client-go retries a 415 in JSON.
        raise errors.unsupported_media_type(request.content_type)
    raw = await request.read()
    if not raw:
        return {}
    try:
        return yaml.safe_load(raw) if "yaml" in request.content_type else json.loads(raw)
    except (ValueError, yaml.YAMLError) as error:
        raise errors.bad_request(f"the request body is not valid JSON: {error}") from error


_BODY_TYPES = frozenset(
    {"application/json", "application/yaml", "application/octet-stream", "text/plain", ""}
)


def _strict(request: web.Request) -> bool:
    return request.query.get("fieldValidation", "") == "Strict"


def _dry_run(request: web.Request) -> bool:
    return request.query.get("dryRun", "") == "All"


def _flag(value: str | None) -> bool:
    return value in ("true", "1")


def _missing() -> Any:
    raise ApiError(404, "NotFound", "the server could not find the requested resource")


def _json(body: Any, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    headers = {}
    if warnings:
        # The real server's Warning header (RFC 7234 code 299), one value per warning.
        headers["Warning"] = ", ".join(_warning(w) for w in warnings)
    return web.Response(
        body=json.dumps(body).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def _warning(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


async def _send(response: web.StreamResponse, event: Object) -> None:
    await response.write(json.dumps(event).encode() + b"\n")
