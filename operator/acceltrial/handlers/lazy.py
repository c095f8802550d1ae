"""``lazy``: a property computed on first use and kept on the instance, without a lock.

``functools.cached_property`` on Python 3.11 takes one lock per property for *every* instance:
while one trial's tick reads its pods inside ``TickSnapshot.targets``, every other trial's tick
waits for the same property, so the operator's ticks ran one API call at a time however many
threads it had (issue 19: about 20 measurements a second at most). A snapshot lives in one
tick's thread, so it needs no lock (Python 3.12 dropped it for the same reason).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class lazy(Generic[T]):  # noqa: N801 - used like the builtin decorators it stands in for
    """Computed by the decorated method on first access, then read from the instance's
    ``__dict__`` (a non-data descriptor: the stored value wins over it)."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.__doc__ = compute.__doc__
        self.name = compute.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> lazy[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | lazy[T]:
        if instance is None:
            return self
        value = self.compute(instance)
        instance.__dict__[self.name] = value
        return value
