"""``IdResolver``: host names mapped to addresses for a crawl (``IDCRAWL_RESOLVE``), like curl's ``--resolve``.

A Scrapy DNS resolver (``TWISTED_DNS_RESOLVER``; ``DNS_RESOLVER`` before Scrapy 2.19): a name in
``IDCRAWL_RESOLVE`` resolves to its address; any other name through Scrapy's own caching resolver,
or, with ``IDCRAWL_RESOLVE_ONLY``, fails without a DNS lookup. docs/scope.md, "Try it locally".
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from scrapy.resolver import CachingThreadedResolver
from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer

from idcrawl.config import config_from

__all__ = ["IdResolver"]


@implementer(IResolverSimple)
class IdResolver:
    """Resolves the names of ``hosts`` (lower case, no trailing dot) to their addresses; other names
    through ``fallback`` (None: they fail, ``IDCRAWL_RESOLVE_ONLY``)."""

    def __init__(self, reactor: Any, hosts: Mapping[str, str], fallback: CachingThreadedResolver | None) -> None:
        self.reactor = reactor
        self.hosts = {name.lower().rstrip("."): address for name, address in hosts.items()}
        self.fallback = fallback

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> IdResolver:
        # crawler: Scrapy passes its CrawlerProcess (the resolver is the process's): only .settings is read
        config = config_from(crawler.settings)
        fallback = None if config.resolve_only else CachingThreadedResolver.from_crawler(crawler, reactor)
        return cls(reactor, dict(config.resolve or ()), fallback)

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        address = self.hosts.get(name.lower().rstrip("."))
        if address is not None:
            return defer.succeed(address)
        try:
            return defer.succeed(str(ipaddress.ip_address(name)))  # an address is itself
        except ValueError:
            pass
        if self.fallback is None:
            return defer.fail(DNSLookupError(f"{name}: not in IDCRAWL_RESOLVE (IDCRAWL_RESOLVE_ONLY: no DNS lookup)"))
        return self.fallback.getHostByName(name, timeout)
