"""Install-and-undo of the emulator's in-place patches of moto (one home for both sets).

`MotoExtensions` and `AccountExtensions` each replace a few of moto's methods and route
tables while they are installed. Patched functions find their extension through a
`Slot` (one installed instance per slot and process), and `uninstall` restores exactly
what was there before, attribute or dict entry, in reverse order.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar, Generic, Self, TypeVar

_MISSING = object()
T = TypeVar("T")


class Slot(Generic[T]):
    """The one installed instance of an extension kind in this process."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.lock = threading.Lock()
        self.active: T | None = None

    def get(self) -> T:
        ext = self.active
        if ext is None:  # pragma: no cover - patches are removed together with the slot
            raise RuntimeError(f"{self.what} are not installed")
        return ext

    def claim(self, ext: T) -> None:
        with self.lock:
            if self.active is not None:
                raise RuntimeError(f"another {self.what} instance is already installed")
            self.active = ext

    def release(self, ext: T) -> None:
        with self.lock:
            if self.active is ext:
                self.active = None


class Patches:
    """An undo log of in-place replacements (object attributes or dict entries)."""

    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        if isinstance(owner, dict):
            self._undo.append((owner, name, owner.get(name, _MISSING)))
            owner[name] = value
        else:
            self._undo.append((owner, name, owner.__dict__.get(name, _MISSING)))
            setattr(owner, name, value)

    def undo_all(self) -> None:
        while self._undo:
            owner, name, old = self._undo.pop()
            if isinstance(owner, dict):
                if old is _MISSING:
                    owner.pop(name, None)
                else:
                    owner[name] = old
            elif old is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, old)


def install(slot: Slot[T], ext: T, patches: Patches, apply: Any) -> None:
    """Claim `slot` for `ext` and run `apply()`; on any failure leave nothing patched."""
    slot.claim(ext)
    try:
        apply()
    except BaseException:
        patches.undo_all()
        slot.release(ext)
        raise


class Installable:
    """`with ext:` / `install()` / `uninstall()` for an extension kind with one slot.

    Subclasses (dataclasses) set `_slot`, own a `_patches` undo log and apply their
    replacements in `_install_patches` through `_patch`.
    """

    _slot: ClassVar[Slot[Any]]
    _patches: Patches

    def __enter__(self) -> Self:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def install(self) -> None:
        install(self._slot, self, self._patches, self._install_patches)

    def uninstall(self) -> None:
        self._patches.undo_all()
        self._slot.release(self)
        self._after_uninstall()

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self._patches.set(owner, name, value)

    def _install_patches(self) -> None:
        raise NotImplementedError

    def _after_uninstall(self) -> None:
        """Drop state that only made sense while installed (nothing by default)."""
