"""Scrapy's component dict settings (``ADDONS``, ``EXTENSIONS``, ``*_MIDDLEWARES``...): an entry added,
or Scrapy's component swapped for idcrawl's, each at its own priority so that a project's own entry wins."""

from __future__ import annotations

from typing import Any

from scrapy.settings import BaseSettings, get_settings_priority
from scrapy.utils.misc import load_object

__all__ = [
    "ADDON_PRIORITY", "NamedAddon", "component_disabled", "mentions_component", "raise_dict_priority",
    "setdefault_component", "swap_component",
]

ADDON_PRIORITY = "addon"


class NamedAddon:
    """Base of idcrawl's add-ons: shown by its import path (Scrapy's "Enabled addons" line), not as an object."""

    def __repr__(self) -> str:
        return f"{type(self).__module__}.{type(self).__qualname__}"

    __str__ = __repr__


def _same_object(key: Any, path: str) -> bool:
    """Whether a component dict key (an import path or the object itself) is the object at ``path``."""
    if key == path:
        return True
    try:
        return bool(load_object(key) is load_object(path))
    except (AttributeError, ImportError, NameError, TypeError, ValueError):
        return False


def _component_dict(settings: BaseSettings, name: str) -> BaseSettings:
    """The component dict ``name`` as a BaseSettings (per-key priorities), creating or converting it."""
    current = settings.get(name)
    if isinstance(current, BaseSettings):
        return current
    priority = settings.getpriority(name) or 0
    converted = BaseSettings(settings.getdict(name), priority=priority)
    settings.set(name, converted, priority=priority)
    return converted


def mentions_component(settings: BaseSettings, name: str, path: str) -> bool:
    """Whether the component dict setting ``name`` has ``path`` (as a string or an object, even as None)."""
    current = settings.get(name)
    keys = current.keys() if isinstance(current, BaseSettings) else settings.getdict(name).keys()
    return any(_same_object(key, path) for key in keys)


def setdefault_component(
    settings: BaseSettings, name: str, path: str, order: int | None, priority: int | str = ADDON_PRIORITY
) -> bool:
    """Add ``path: order`` to the component dict ``name`` unless it is mentioned already; True if added.

    Unlike ``BaseSettings.set_in_component_priority_dict`` (which rewrites the
    whole dict at the dict's priority) the entry gets its own ``priority``, so a
    project that lists the same component later, or at a higher priority, wins.
    """
    if mentions_component(settings, name, path):
        return False
    components = _component_dict(settings, name)
    components.set(path, order, priority=priority)
    raise_dict_priority(settings, name, priority)
    return True


def swap_component(
    settings: BaseSettings, name: str, old: str, new: str, order: int | None = None
) -> None:
    """Put ``new`` in place of ``old`` in the component dict ``name``; nothing when ``new`` is listed.

    With ``order`` (``old`` is one of Scrapy's base components) the two are one piece: a project that
    lists either decides for both; otherwise ``old`` is turned off and ``new`` added at ``order``.
    Without (``old`` is listed, by idcrawl's add-on or the project), each entry of ``old`` is turned
    off and ``new`` takes its order and priority; nothing when ``old`` is not listed.
    """
    if mentions_component(settings, name, new):
        return
    if order is not None:
        if not mentions_component(settings, name, old):
            setdefault_component(settings, name, old, None)
            setdefault_component(settings, name, new, order)
        return
    if not mentions_component(settings, name, old):
        return
    components = _component_dict(settings, name)
    for key in list(components):
        if _same_object(key, old):
            priority = components.getpriority(key) or 0
            place = components[key]
            components.set(key, None, priority=priority)
            components.set(new, place, priority=priority)
    settings.set(name, components, priority=max(settings.getpriority(name) or 0, components.maxpriority()))


def component_disabled(settings: BaseSettings, name: str, path: str) -> bool:
    """Whether the component dict setting ``name`` lists ``path`` (a string or an object) as None: turned off."""
    current = settings.get(name)
    items = current.items() if isinstance(current, BaseSettings) else settings.getdict(name).items()
    return any(value is None and _same_object(key, path) for key, value in items)


def raise_dict_priority(settings: BaseSettings, name: str, priority: int | str) -> None:
    """Make the dict setting ``name`` as a whole at least as strong as ``priority`` (its keys keep theirs).

    Needed after changing a key in place: ``scrapy crawl`` (Scrapy 2.19) merges the
    process's settings into the crawler's again after the spider's ``update_settings``
    ran, and that merge replaces a whole dict whose own priority is not higher, which
    would silently undo what the spider added to ``ADDONS`` or ``DOWNLOADER_MIDDLEWARES``.
    """
    wanted = get_settings_priority(priority)
    if (settings.getpriority(name) or 0) < wanted:
        settings.set(name, settings[name], priority=wanted)  # a copy that keeps each key's priority
