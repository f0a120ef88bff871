"""The crawl's settings read once: the typed, frozen :class:`IdConfig` of its ``IDCRAWL_*`` settings.

Components read ``config_of(crawler).window`` (one attribute per setting, lower-cased without
``IDCRAWL_``), not Scrapy's getters with a fallback from ``default_settings``: the table, the checks
and the defaults live in :mod:`idcrawl.core.setting_specs`. Code that has settings but no crawler (commands,
add-ons) uses :func:`config_from`; a read while the settings are still being assembled (an add-on's
``update_settings``, a profile) uses :func:`setting`. ``tests/unit/test_config.py`` fails for a
``settings.get*("IDCRAWL_...")`` outside this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from idcrawl.core.setting_specs import IdConfig, SettingError, build_config, read_setting
from idcrawl.errors import BadInputError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["IdConfig", "config_from", "config_of", "given", "setting"]

_CONFIGS: WeakKeyDictionary[Crawler, IdConfig] = WeakKeyDictionary()


def config_from(settings: Any) -> IdConfig:
    """The config of ``settings`` (anything with ``.get``); a bad value is one line
    (``bad setting: IDCRAWL_WINDOW='abc': must be an integer >= 1``)."""
    try:
        return build_config(settings.get)
    except SettingError as exc:
        raise BadInputError(f"bad setting: {exc}") from None


def config_of(crawler: Crawler) -> IdConfig:
    """The crawl's config, built once its settings are frozen (and held from then on)."""
    config = _CONFIGS.get(crawler)
    if config is None:
        config = config_from(crawler.settings)
        if crawler.settings.frozen:  # before that a profile or the spider may still change them
            _CONFIGS[crawler] = config
    return config


def setting(settings: Any, name: str) -> Any:
    """One setting as :class:`IdConfig` holds it, read from settings still being assembled; a value
    of the wrong type raises :class:`~idcrawl.core.setting_specs.SettingError` (a ``ValueError``, as
    Scrapy's getters do), the range is left to the validation of the final settings."""
    return read_setting(settings.get, name)


def given(settings: Any, name: str) -> Any:
    """A setting's value as given (None when unset), for a message that quotes it."""
    return settings.get(name)
