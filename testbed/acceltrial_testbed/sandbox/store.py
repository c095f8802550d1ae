"""The sandbox's object store: what etcd plus the API server's generic registry do.

It owns object identity and lifecycle: ``uid``, one cluster-wide monotonic ``resourceVersion``,
``creationTimestamp``, ``generateName``, ``generation`` (bumped when anything but metadata and
status changes), optimistic concurrency, the status subresource's separation from the main
resource, finalizers and ``deletionTimestamp``, and background garbage collection through
``ownerReferences``. Every change becomes a watch event kept in a bounded history, so a watch can
resume from a resourceVersion, and a version older than the history answers 410 Gone.

It is not thread-safe: the server, the controllers and watches all run on one event loop.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import re
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from acceltrial_testbed.sandbox import errors
from acceltrial_testbed.sandbox.resources import Registry, ResourceType
from acceltrial_testbed.sandbox.selectors import Selector

Object = dict[str, Any]
Clock = Callable[[], datetime]
# group, plural, namespace ("" for cluster-scoped kinds), name
Key = tuple[str, str, str, str]

_NAME_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet
FOREGROUND = "foregroundDeletion"
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def utc_now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    """RFC 3339 at second precision, as metadata timestamps are serialized."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Change:
    """One stored change: the event type, the object after it, and before it (None if new)."""

    type: str  # ADDED, MODIFIED, DELETED
    resource: ResourceType
    object: Object
    old: Object | None
    version: int


class Admission(Protocol):
    """A hook that may default, validate or refuse a write (CRD schemas use it)."""

    def __call__(
        self, resource: ResourceType, new: Object, old: Object | None, strict: bool
    ) -> tuple[Object, list[str]]:
        """Return the object to store and warnings; raise ApiError to refuse."""
        ...


@dataclass
class Watch:
    """One open watch: the changes it selects arrive on ``queue``."""

    resource: ResourceType
    namespace: str | None
    selector: Selector
    queue: asyncio.Queue[tuple[str, Object]] = field(default_factory=asyncio.Queue)

    def offer(self, change: Change) -> None:
        event = self.translate(change)
        if event is not None:
            self.queue.put_nowait(event)

    def translate(self, change: Change) -> tuple[str, Object] | None:
        """The event this watch sees; an object entering or leaving its selector is ADDED or
        DELETED, as the real server's watch cache reports it."""
        if change.resource.key != self.resource.key:
            return None
        if self.namespace is not None and _namespace(change.object) != self.namespace:
            return None
        now = self.selector.matches(change.object)
        before = change.old is not None and self.selector.matches(change.old)
        if change.type == "MODIFIED" and now != before:
            return ("ADDED", change.object) if now else ("DELETED", change.object)
        return (change.type, change.object) if now else None


class Store:
    """In-memory objects with the API server's write semantics (see the module docstring)."""

    def __init__(self, registry: Registry, clock: Clock = utc_now, history: int = 10_000) -> None:
        self.registry = registry
        self.clock = clock
        self._objects: dict[Key, Object] = {}
        self._by_kind: dict[tuple[str, str], dict[Key, Object]] = {}
        self._uids: dict[str, Key] = {}
        self._dependents: dict[str, set[Key]] = {}  # owner uid -> keys of its dependents
        self._version = 0
        self._history: deque[Change] = deque()
        self._history_size = history
        self._compacted = 0  # the newest version no longer in the history
        self._watches: list[Watch] = []
        self._kinds: dict[tuple[str, str], ResourceType] = {}
        self.admissions: list[Admission] = []
        self.listeners: list[Callable[[Change], None]] = []
        for name in DEFAULT_NAMESPACES:
            self.create(self._namespaces, "", {"metadata": {"name": name}})

    @property
    def _namespaces(self) -> ResourceType:
        found = self.registry.find("", "v1", "namespaces")
        assert found is not None  # a built-in kind
        return found

    @property
    def version(self) -> int:
        return self._version

    # Reading

    def get(self, resource: ResourceType, namespace: str, name: str) -> Object:
        return copy.deepcopy(self._existing(resource, namespace, name))

    def list_objects(
        self, resource: ResourceType, namespace: str | None, selector: Selector | None = None
    ) -> tuple[list[Object], int]:
        """The matching objects (sorted by namespace and name) and the list's resourceVersion."""
        selector = selector or Selector()
        items = [
            copy.deepcopy(obj)
            for key, obj in sorted(self._by_kind.get(resource.key, {}).items())
            if (namespace is None or key[2] == namespace) and selector.matches(obj)
        ]
        return items, self._version

    def peek(self, resource: ResourceType) -> list[Object]:
        """Every object of a kind, not copied: for in-process readers (the controllers) that
        never change what they read; a list of thousands of pods then costs no copies."""
        return list(self._by_kind.get(resource.key, {}).values())

    def _existing(self, resource: ResourceType, namespace: str, name: str) -> Object:
        obj = self._objects.get(_key(resource, namespace, name))
        if obj is None:
            raise errors.not_found(resource.plural, resource.group, name)
        return obj

    def owned_by(self, uid: str) -> Iterator[tuple[Key, Object]]:
        """The objects naming ``uid`` in their ownerReferences (from an index, not a scan)."""
        for key in sorted(self._dependents.get(uid, ())):
            obj = self._objects.get(key)
            if obj is not None:
                yield key, obj

    # Writing

    def create(
        self,
        resource: ResourceType,
        namespace: str,
        body: Object,
        *,
        strict: bool = False,
        dry_run: bool = False,
    ) -> tuple[Object, list[str]]:
        """Create; with ``dry_run`` every check runs but nothing is stored (``dryRun=All``)."""
        obj = copy.deepcopy(body)
        if obj.get("metadata") is None:  # JSON null decodes to empty metadata, as upstream
            obj["metadata"] = {}
        meta = obj["metadata"]
        if not isinstance(meta, dict):
            raise errors.bad_request(
                f"json: cannot unmarshal {type(meta).__name__} into Go struct field "
                f"{resource.kind}.metadata of type v1.ObjectMeta"
            )
        namespace = self._namespace_for(resource, namespace, meta)
        name = meta.get("name") or self._generated_name(resource, namespace, meta)
        _check_name(resource, name)
        if _key(resource, namespace, name) in self._objects:
            raise errors.already_exists(resource.plural, resource.group, name)
        if resource.status:
            obj.pop("status", None)  # status is written through /status only
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        now = timestamp(self.clock())
        meta.update(name=name, uid=str(uuid.uuid4()), creationTimestamp=now, generation=1)
        for server_owned in ("resourceVersion", "deletionTimestamp", "selfLink"):
            meta.pop(server_owned, None)
        if namespace:
            meta["namespace"] = namespace
        obj, warnings = self._admit(resource, obj, None, strict)
        if resource.plural == "namespaces" and not resource.group:
            obj["status"] = {"phase": "Active"}
        if dry_run:
            return obj, warnings
        self._commit("ADDED", resource, obj, None)
        return copy.deepcopy(obj), warnings

    def _namespace_for(self, resource: ResourceType, namespace: str, meta: Object) -> str:
        if not resource.namespaced:
            meta.pop("namespace", None)
            return ""
        given = meta.get("namespace")
        if given and namespace and given != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        namespace = namespace or given or "default"
        if ("", "namespaces", "", namespace) not in self._objects:
            raise errors.not_found("namespaces", "", namespace)
        return str(namespace)

    def _generated_name(self, resource: ResourceType, namespace: str, meta: Object) -> str:
        prefix = meta.get("generateName")
        if not prefix:
            raise errors.invalid(
                resource.kind,
                resource.group,
                "",
                [
                    {
                        "reason": "FieldValueRequired",
                        "field": "metadata.name",
                        "message": "Required value: name or generateName is required",
                    }
                ],
            )
        for _ in range(8):
            name = str(prefix) + "".join(random.choices(_NAME_SUFFIX_CHARS, k=5))
            if _key(resource, namespace, name) not in self._objects:
                return name
        raise errors.already_exists(resource.plural, resource.group, str(prefix))

    def update(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        change: Callable[[Object], Object],
        *,
        subresource: str | None = None,
        strict: bool = False,
        dry_run: bool = False,
    ) -> tuple[Object, list[str]]:
        """Replace or patch: ``change`` maps the current object to the requested one."""
        old = self._existing(resource, namespace, name)
        requested = change(copy.deepcopy(old))
        if not isinstance(requested, dict):
            raise errors.bad_request("the request body must be an object")
        wanted_version = _meta(requested).get("resourceVersion")
        if wanted_version and str(wanted_version) != _meta(old)["resourceVersion"]:
            raise errors.conflict(resource.plural, resource.group, name)
        new = self._compose(resource, old, requested, subresource)
        new, warnings = self._admit(resource, new, old, strict)
        if _strip_version(new) == _strip_version(old):
            return copy.deepcopy(old), warnings  # a no-op write changes no resourceVersion
        if _spec_of(new) != _spec_of(old):
            _meta(new)["generation"] = _meta(old).get("generation", 1) + 1
        if dry_run:
            return new, warnings
        self._commit("MODIFIED", resource, new, old)
        if _meta(new).get("deletionTimestamp") and not _meta(new).get("finalizers"):
            self._remove(resource, new)
        return copy.deepcopy(new), warnings

    def _compose(
        self, resource: ResourceType, old: Object, requested: Object, subresource: str | None
    ) -> Object:
        """The object a write asks for, with what the client may not change put back."""
        if subresource == "status":
            return _with_status_of(old, requested)  # a status write changes only status
        new = _with_status_of(requested, old) if resource.status else copy.deepcopy(requested)
        new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
        meta, old_meta = new.setdefault("metadata", {}), _meta(old)
        for immutable in ("name", "namespace", "uid", "creationTimestamp", "generation"):
            if immutable in old_meta:
                meta[immutable] = old_meta[immutable]
        meta.pop("deletionTimestamp", None)
        if "deletionTimestamp" in old_meta:
            meta["deletionTimestamp"] = old_meta["deletionTimestamp"]
            _refuse_new_finalizers(resource, old_meta, meta)
        return new

    def delete(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        *,
        propagation: str = "Background",
        precondition_version: str | None = None,
    ) -> Object:
        """Delete, or mark for deletion while finalizers remain; returns the object."""
        obj = self._existing(resource, namespace, name)
        meta = _meta(obj)
        if precondition_version and precondition_version != meta["resourceVersion"]:
            raise errors.conflict(resource.plural, resource.group, name)
        if propagation == "Orphan":
            self._orphan(meta["uid"])
        if propagation == "Foreground" and any(self.owned_by(meta["uid"])):
            return self._delete_foreground(resource, obj)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return copy.deepcopy(obj)
            return copy.deepcopy(self._mark_deleted(resource, obj))
        return copy.deepcopy(self._remove(resource, obj))

    def _mark_deleted(
        self, resource: ResourceType, obj: Object, add_finalizer: str | None = None
    ) -> Object:
        marked = copy.deepcopy(obj)
        meta = marked["metadata"]
        meta.setdefault("deletionTimestamp", timestamp(self.clock()))
        meta["deletionGracePeriodSeconds"] = 0
        if add_finalizer and add_finalizer not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), add_finalizer]
        self._commit("MODIFIED", resource, marked, obj)
        return marked

    def _delete_foreground(self, resource: ResourceType, obj: Object) -> Object:
        """Foreground cascading deletion: the owner gets the ``foregroundDeletion`` finalizer
        and stays, marked, until the garbage collector has deleted its dependents."""
        uid = _meta(obj)["uid"]
        if FOREGROUND in (_meta(obj).get("finalizers") or []):
            return copy.deepcopy(obj)  # already being deleted in the foreground
        marked = self._mark_deleted(resource, obj, FOREGROUND)
        for (group, plural, namespace, name), _ in list(self.owned_by(uid)):
            kind = self._type_of(group, plural)
            if kind is not None and _key(kind, namespace, name) in self._objects:
                self.delete(kind, namespace, name, propagation="Foreground")
        self._release_foreground(uid)
        return copy.deepcopy(marked)

    def _release_foreground(self, owner_uid: str) -> None:
        """Drop an owner's ``foregroundDeletion`` finalizer once its last dependent is gone."""
        key = self._uids.get(owner_uid)
        owner = self._objects.get(key) if key is not None else None
        if owner is None or FOREGROUND not in (_meta(owner).get("finalizers") or []):
            return
        if any(self.owned_by(owner_uid)):
            return
        kind = self._type_of(key[0], key[1]) if key is not None else None
        if kind is not None and key is not None:
            self.update(kind, key[2], key[3], _without_finalizer(FOREGROUND))

    def _remove(self, resource: ResourceType, obj: Object) -> Object:
        gone = copy.deepcopy(obj)
        self._commit("DELETED", resource, gone, obj)
        self._collect_garbage(_meta(obj)["uid"])
        for ref in _meta(obj).get("ownerReferences") or []:
            self._release_foreground(ref.get("uid", ""))
        if resource.key == ("", "namespaces"):
            self._empty_namespace(_meta(obj)["name"])
        return gone

    def _empty_namespace(self, namespace: str) -> None:
        """The namespace controller's job: a deleted namespace takes its objects with it (here
        at once, where the real one first shows the namespace as Terminating)."""
        for key in [k for k in self._objects if k[2] == namespace]:
            kind = self._type_of(key[0], key[1])
            if kind is not None and key in self._objects:
                self.delete(kind, namespace, key[3])

    def _collect_garbage(self, owner_uid: str) -> None:
        """Background cascading deletion: a dependent whose owners are all gone is deleted."""
        for (group, plural, namespace, name), dependent in list(self.owned_by(owner_uid)):
            refs = _meta(dependent).get("ownerReferences") or []
            if any(ref.get("uid") in self._uids for ref in refs):
                continue
            kind = self._type_of(group, plural)
            if kind is not None and _key(kind, namespace, name) in self._objects:
                self.delete(kind, namespace, name)

    def _orphan(self, owner_uid: str) -> None:
        for (group, plural, namespace, name), _ in list(self.owned_by(owner_uid)):
            kind = self._type_of(group, plural)
            if kind is not None:
                self.update(kind, namespace, name, lambda o: _drop_owner(o, owner_uid))

    def _type_of(self, group: str, plural: str) -> ResourceType | None:
        return self._kinds.get((group, plural))

    def remove_all(self, group: str, plural: str) -> None:
        """Delete every object of a kind (its CRD was deleted)."""
        kind = self._type_of(group, plural)
        for key, obj in list(self._objects.items()):
            if key[:2] == (group, plural) and kind is not None:
                self._remove(kind, obj)

    def _admit(
        self, resource: ResourceType, new: Object, old: Object | None, strict: bool
    ) -> tuple[Object, list[str]]:
        warnings: list[str] = []
        for admission in self.admissions:
            new, more = admission(resource, new, old, strict)
            warnings += more
        return new, warnings

    def _commit(self, kind: str, resource: ResourceType, obj: Object, old: Object | None) -> None:
        self._version += 1
        _meta(obj)["resourceVersion"] = str(self._version)
        key = _key(resource, _namespace(obj), _meta(obj)["name"])
        self._kinds[resource.key] = resource
        self._index_owners(key, old, None if kind == "DELETED" else obj)
        same_kind = self._by_kind.setdefault(resource.key, {})
        if kind == "DELETED":
            self._objects.pop(key, None)
            same_kind.pop(key, None)
            self._uids.pop(_meta(obj)["uid"], None)
        else:
            self._objects[key] = obj
            same_kind[key] = obj
            self._uids[_meta(obj)["uid"]] = key
        change = Change(kind, resource, obj, old, self._version)
        self._remember(change)
        for watch in self._watches:
            watch.offer(change)
        for listener in self.listeners:
            listener(change)

    def _index_owners(self, key: Key, old: Object | None, new: Object | None) -> None:
        for uid in _owner_uids(old) - _owner_uids(new):
            dependents = self._dependents.get(uid, set())
            dependents.discard(key)
            if not dependents:
                self._dependents.pop(uid, None)
        for uid in _owner_uids(new) - _owner_uids(old):
            self._dependents.setdefault(uid, set()).add(key)

    # Watching

    def _remember(self, change: Change) -> None:
        self._history.append(change)
        while len(self._history) > self._history_size:
            self._compacted = self._history.popleft().version

    def compact(self) -> None:
        """Forget the whole history, as etcd compaction does: older versions answer 410."""
        self._history.clear()
        self._compacted = self._version

    def watch(
        self,
        resource: ResourceType,
        namespace: str | None,
        selector: Selector,
        since: int | None,
        *,
        mark_initial_end: bool = False,
    ) -> Watch:
        """Open a watch. ``since`` None replays the current objects as ADDED first (then, with
        ``mark_initial_end``, a BOOKMARK saying so, as for ``sendInitialEvents``); a version
        replays only the later changes, or raises 410 Gone when they are no longer kept."""
        watch = Watch(resource, namespace, selector)
        if since is None:
            for obj in self.list_objects(resource, namespace, selector)[0]:
                watch.queue.put_nowait(("ADDED", obj))
            if mark_initial_end:
                watch.queue.put_nowait(("BOOKMARK", self.bookmark(resource, initial_end=True)))
        elif since < self._compacted:
            raise errors.gone(f"too old resource version: {since} ({self._compacted + 1})")
        else:
            for change in self._history:
                if change.version > since:
                    watch.offer(change)
        self._watches.append(watch)
        return watch

    def bookmark(self, resource: ResourceType, initial_end: bool = False) -> Object:
        """A BOOKMARK event's object: only the kind and the current resourceVersion."""
        meta: Object = {"resourceVersion": str(self._version)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": meta}

    def unwatch(self, watch: Watch) -> None:
        if watch in self._watches:
            self._watches.remove(watch)

    @property
    def watch_count(self) -> int:
        return len(self._watches)


_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Kinds whose names must be DNS labels (no dots, at most 63 characters), as on the real server.
_LABEL_NAMED = {("", "namespaces"), ("", "services")}


def _check_name(resource: ResourceType, name: str) -> None:
    if resource.key in _LABEL_NAMED:
        ok, limit, rule = bool(_LABEL.match(name)), 63, "RFC 1123 label"
        pattern = _LABEL.pattern
    else:
        ok, limit, rule = bool(_SUBDOMAIN.match(name)), 253, "RFC 1123 subdomain"
        pattern = _SUBDOMAIN.pattern
    if ok and len(name) <= limit:
        return
    message = (
        f"Invalid value: {json.dumps(name)}: a lowercase {rule} must consist of lower case "
        "alphanumeric characters or '-'"
        + (" or '.'" if limit == 253 else "")
        + f", start and end with an alphanumeric character and be at most {limit} characters "
        f"(regex used for validation is '{pattern[1:-1]}')"
    )
    raise errors.invalid(
        resource.kind,
        resource.group,
        name,
        [{"reason": "FieldValueInvalid", "field": "metadata.name", "message": message}],
    )


def _key(resource: ResourceType, namespace: str, name: str) -> Key:
    return (resource.group, resource.plural, namespace if resource.namespaced else "", name)


def _meta(obj: Object) -> dict[str, Any]:
    meta: dict[str, Any] = obj.setdefault("metadata", {})
    return meta


def _namespace(obj: Object) -> str:
    return str(obj.get("metadata", {}).get("namespace") or "")


def _with_status_of(body: Object, source: Object) -> Object:
    """A copy of ``body`` whose status is ``source``'s (none when ``source`` has none)."""
    result = copy.deepcopy(body)
    if "status" in source:
        result["status"] = copy.deepcopy(source["status"])
    else:
        result.pop("status", None)
    return result


def _refuse_new_finalizers(resource: ResourceType, old_meta: Object, meta: Object) -> None:
    """An object being deleted may lose finalizers but not gain any (422, as the real server)."""
    if set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or []):
        raise errors.invalid(
            resource.kind,
            resource.group,
            old_meta["name"],
            [
                {
                    "reason": "FieldValueForbidden",
                    "field": "metadata.finalizers",
                    "message": "Forbidden: no new finalizers can be added if the object is "
                    "being deleted",
                }
            ],
        )


def _owner_uids(obj: Object | None) -> set[str]:
    if obj is None:
        return set()
    return {str(ref.get("uid")) for ref in obj.get("metadata", {}).get("ownerReferences") or []}


def _spec_of(obj: Object) -> Object:
    """What ``generation`` tracks: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _strip_version(obj: Object) -> Object:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return obj | {"metadata": meta}


def _drop_owner(obj: Object, owner_uid: str) -> Object:
    refs = [r for r in _meta(obj).get("ownerReferences") or [] if r.get("uid") != owner_uid]
    _meta(obj)["ownerReferences"] = refs or None
    if not refs:
        del _meta(obj)["ownerReferences"]
    return obj


def _without_finalizer(finalizer: str) -> Callable[[Object], Object]:
    def change(obj: Object) -> Object:
        finalizers = [f for f in _meta(obj).get("finalizers") or [] if f != finalizer]
        _meta(obj)["finalizers"] = finalizers
        return obj

    return change
