"""Redis Sentinel: the job's primary found through its sentinels, followed through a failover.

:func:`sentinel_client` (``connect()``'s hook); :func:`primary_address` and :func:`primary_id` tell a worker
that another server answers now (a failover, a restart), which may lack writes the old one acknowledged
(``RedisWorker`` then reconciles). docs/distributed.md ("Sentinel and failover").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from idcrawl.config import config_from, given
from idcrawl.core.safetext import safe
from idcrawl.errors import BadInputError

if TYPE_CHECKING:
    import redis

__all__ = ["describe_sentinels", "primary_address", "primary_id", "sentinel_client"]

#: REDIS_PARAMS that only scrapy-redis's client factory reads (not a connection's keyword).
_FACTORY_PARAMS = ("redis_cls", "url")


def describe_sentinels(settings: Any) -> str | None:
    """Where the settings point when Sentinel is on, for error lines; None when it is off."""
    sentinels = given(settings, "IDCRAWL_REDIS_SENTINELS")  # as given: the line may be about a bad value
    if not sentinels:
        return None
    where = sentinels if isinstance(sentinels, str) else ",".join(map(str, sentinels))
    service = given(settings, "IDCRAWL_REDIS_SENTINEL_SERVICE") or "mymaster"
    return f"IDCRAWL_REDIS_SENTINELS={safe(repr(where))} (service {safe(repr(service))})"


def sentinel_client(settings: Any) -> redis.Redis | None:
    """The job's primary through its sentinels (``IDCRAWL_REDIS_SENTINELS``), or None when Sentinel is off.

    redis-py's ``Sentinel(...).master_for(service)``: every new connection asks the sentinels for the
    primary, so after a failover the first call that fails (the old primary gone, or demoted: read-only)
    is an outage as any other, and the next connection goes to the promoted replica. REDIS_URL's
    username, password, db and TLS and REDIS_PARAMS apply to the primary (its host and port are not
    used); the sentinels get ``IDCRAWL_REDIS_SENTINEL_PASSWORD`` and the socket timeouts.
    """
    if not given(settings, "IDCRAWL_REDIS_SENTINELS"):
        return None
    try:
        config = config_from(settings)
    except BadInputError as exc:  # connect()'s line: "... is unreachable: bad setting: IDCRAWL_REDIS_SENTINELS=..."
        raise ValueError(str(exc)) from None
    sentinels = config.redis_sentinels or ()
    import redis
    from redis.sentinel import Sentinel, SentinelManagedSSLConnection
    from scrapy_redis import defaults

    params: dict[str, Any] = {**defaults.REDIS_PARAMS, **settings.getdict("REDIS_PARAMS")}
    for name in _FACTORY_PARAMS:
        params.pop(name, None)
    url = settings.get("REDIS_URL")
    if url:
        parse_url: Any = redis.connection.parse_url  # (untyped in redis-py)
        parsed = parse_url(url)
        ssl = parsed.pop("connection_class", None) is redis.connection.SSLConnection
        parsed.pop("host", None)
        parsed.pop("port", None)
        parsed.pop("path", None)
        params = {**parsed, **params}
        if ssl:
            params["connection_class"] = SentinelManagedSSLConnection
    elif settings.get("REDIS_DB"):
        params["db"] = settings.getint("REDIS_DB")
    sentinel_kwargs = {k: v for k, v in params.items() if k.startswith("socket_")}
    password = config.redis_sentinel_password
    if password:
        sentinel_kwargs["password"] = password
    make_manager: Any = Sentinel  # (untyped in redis-py)
    manager = make_manager(list(sentinels), sentinel_kwargs=sentinel_kwargs, **params)
    client: redis.Redis = manager.master_for(config.redis_sentinel_service)
    return client


def primary_address(client: Any) -> tuple[str, int] | None:
    """The primary the sentinels named for the client's last new connection (no call); None without
    Sentinel. A change between two polls is a failover, even when no call failed: redis-py replaces a
    connection the old primary closed before it sends anything on it."""
    from redis.cluster import RedisCluster
    from redis.sentinel import SentinelConnectionPool

    if isinstance(client, RedisCluster):  # a cluster's client has a pool per node, and no sentinels
        return None
    pool = client.connection_pool
    if not isinstance(pool, SentinelConnectionPool):
        return None
    address = pool.master_address
    return None if address is None else (str(address[0]), int(address[1]))


def primary_id(client: Any, key: str) -> str:
    """The answering server's ``run_id`` (one ``INFO server``): another id after an outage means another
    process answers now (a replica promoted by a failover, or Redis restarted), which may lack the last
    writes the old one acknowledged. ``key``: one of the job's keys; a cluster client asks the master of
    its slot (a replica the cluster promoted has another id too)."""
    from redis.cluster import RedisCluster

    node = {"target_nodes": client.get_node_from_key(key)} if isinstance(client, RedisCluster) else {}  # type: ignore[no-untyped-call]
    return str(client.info("server", **node).get("run_id", ""))
