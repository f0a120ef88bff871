"""Connecting to a job's Redis: scrapy-redis's connection settings, one clear error.

The client (``REDIS_URL``, ``REDIS_PARAMS``, ...), the job's key prefix ``<IDCRAWL_REDIS_PREFIX>:{<job>}:``,
the ``noeviction`` check, and :func:`count_calls`, which counts every call in the crawl's stats.
docs/distributed.md ("Redis configuration", "Key layout and Redis Cluster"); docs/architecture.md
("Module notes").
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from idcrawl.config import given, setting
from idcrawl.core.safetext import mask_secrets, safe

if TYPE_CHECKING:
    import redis

__all__ = [
    "CALLS_PREFIX", "RedisUnavailable", "check_no_eviction", "command_name", "connect", "count_calls", "describe",
    "distributed", "job_prefix", "needs_redis", "reply_text", "state_backend",
]


#: Prefix of the call counts in a crawl's stats (see :func:`count_calls`).
CALLS_PREFIX = "idcrawl/redis"


class RedisUnavailable(Exception):
    """Redis cannot be reached or used; the message names ``REDIS_URL`` and the cause."""


def describe(settings: Any) -> str:
    """Where the settings point, for error lines: ``REDIS_URL='redis://:***@host:6379/0'`` (a password
    masked: these lines reach scrapyd's and Zyte's job logs)."""
    from idcrawl.distributed.sentinel import describe_sentinels

    sentinels = describe_sentinels(settings)
    if sentinels:
        return sentinels
    url = settings.get("REDIS_URL")
    if url:
        return f"REDIS_URL={safe(repr(url))}"
    host = settings.get("REDIS_HOST") or "localhost"
    port = settings.get("REDIS_PORT") or 6379
    return f"REDIS_URL unset (REDIS_HOST={safe(repr(host))}, REDIS_PORT={safe(repr(port))})"


def connect(settings: Any, *, idempotent: bool = False, stats: Any = None) -> redis.Redis:
    """A client from the scrapy-redis settings, checked with PING (Lua and TIME needed: Redis >= 5).

    ``idempotent``: every call the caller makes may be sent twice (the single-process state
    store's commits merge, reads are reads), so redis-py may retry a call briefly.
    ``stats``: a Scrapy stats collector that counts every call of the client (:func:`count_calls`),
    the two of the check included.
    """
    try:
        import redis
        from scrapy_redis.connection import get_redis_from_settings
    except ImportError as exc:  # pragma: no cover - the 'distributed' extra is missing
        raise RedisUnavailable(f"{exc.name} is not installed: pip install 'idcrawl[distributed]'") from None
    try:
        from idcrawl.distributed.sentinel import sentinel_client

        client: redis.Redis = sentinel_client(settings) or get_redis_from_settings(settings)
        if "retry" not in settings.getdict("REDIS_PARAMS"):
            # a worker's calls get no retry inside a call: the job's scripts are not idempotent (a CLAIM
            # whose reply was lost and that redis-py sent again would leave the first block claimed and
            # unknown), and a retry would block the reactor. A failed call surfaces as an outage; the
            # worker's poll retries, then reconciles what the cut replies did (idcrawl.distributed.worker).
            from redis.backoff import ExponentialBackoff, NoBackoff
            from redis.retry import Retry

            if idempotent:
                client.set_retry(Retry(ExponentialBackoff(cap=0.5, base=0.05), 3))
            else:
                client.set_retry(Retry(NoBackoff(), 0))
        if stats is not None:
            count_calls(client, stats)
        client.ping()
        version = str(client.info("server").get("redis_version", "0"))
    except (redis.RedisError, OSError, ValueError) as exc:
        raise RedisUnavailable(f"Redis at {describe(settings)} is unreachable: {safe(exc)}") from None
    if int(version.split(".")[0]) < 5:
        raise RedisUnavailable(f"Redis at {describe(settings)} is version {version}; idcrawl needs 5 or later")
    return client


#: The one ``maxmemory-policy`` that never deletes a key to make room.
NO_EVICTION = "noeviction"
def check_no_eviction(client: Any, settings: Any) -> str | None:
    """Refuse a Redis whose ``maxmemory-policy`` may evict keys (anything but ``noeviction``): an evicted
    lane or set loses ids silently. Raises :class:`RedisUnavailable` (one line). Returns a warning to show
    when ``CONFIG GET`` is not allowed (renamed, an ACL, a managed Redis): the caller goes on; else None."""
    import redis

    where = mask_secrets(describe(settings))
    try:
        reply = client.config_get("maxmemory-policy")
    except redis.ResponseError as exc:  # NoPermissionError too; unknown command when CONFIG is renamed
        return (f"the maxmemory-policy of Redis at {where} cannot be read ({mask_secrets(str(exc))}): make sure "
                f"it is {NO_EVICTION!r}, or keys of the job may be evicted and its ids lost")
    except (redis.RedisError, OSError) as exc:
        raise RedisUnavailable(f"Redis at {where} is unreachable: {mask_secrets(str(exc))}") from None
    policy = reply_text(next(iter(reply.values()), "")) if reply else ""
    if policy and policy != NO_EVICTION:
        raise RedisUnavailable(
            f"Redis at {where} has maxmemory-policy {policy!r}, which may evict the job's keys (lanes, outcomes: "
            f"ids lost): set it to {NO_EVICTION!r} (redis.conf, or CONFIG SET maxmemory-policy {NO_EVICTION})")
    return None


def command_name(args: tuple[Any, ...]) -> str:
    """The name a command is counted under: lower case, a job script by its name (``EVALSHA <sha of
    claim.lua>``: ``claim``; an unknown script: ``evalsha``)."""
    name = reply_text(args[0]).lower() if args else "?"
    if name in ("evalsha", "eval") and len(args) > 1:
        from idcrawl.distributed.scripts import NAMES

        body = reply_text(args[1])
        key = body if name == "evalsha" else hashlib.sha1(body.encode()).hexdigest()  # noqa: S324 - Redis's own
        return NAMES.get(key, name)
    return name


def count_calls(client: Any, stats: Any, prefix: str = CALLS_PREFIX) -> Any:
    """Count every call ``client`` makes in ``stats``, sent or attempted (a call during an outage counts).

    ``<prefix>/calls``: round trips (one command, or one pipeline of many); ``<prefix>/commands``:
    the commands they carried, and ``<prefix>/commands/<name>`` per command (:func:`command_name`).
    Commands that the job's Lua scripts run inside Redis are not calls and are not counted. The
    client's ``execute_command`` and ``pipeline`` are wrapped in place (scripts go through
    ``execute_command``), so every caller of the client is counted; returns the client.
    """
    execute = client.execute_command
    make_pipeline = client.pipeline

    def count(commands: list[tuple[Any, ...]]) -> None:
        stats.inc_value(f"{prefix}/calls")
        stats.inc_value(f"{prefix}/commands", len(commands))
        for args in commands:
            stats.inc_value(f"{prefix}/commands/{command_name(args)}")

    def counted(*args: Any, **options: Any) -> Any:
        count([args])
        return execute(*args, **options)

    def pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = make_pipeline(*args, **kwargs)
        run = pipe.execute

        def counted_execute(*run_args: Any, **run_kwargs: Any) -> Any:
            if pipe.command_stack:
                count([command_args for command_args, _ in pipe.command_stack])
            return run(*run_args, **run_kwargs)

        pipe.execute = counted_execute
        return pipe

    client.execute_command = counted
    client.pipeline = pipeline
    return client


def reply_text(value: Any) -> str:
    """A Redis reply value as text: bytes decoded, None as ''."""
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def job_prefix(settings: Any, spider_name: str) -> str:
    """The job's key prefix, e.g. ``idcrawl:{idseq}:``."""
    prefix = setting(settings, "IDCRAWL_REDIS_PREFIX")
    job = setting(settings, "IDCRAWL_REDIS_JOB") or spider_name
    return f"{prefix}:{{{job}}}:"


def distributed(settings: Any) -> bool:
    return bool(setting(settings, "IDCRAWL_DISTRIBUTED"))


def state_backend(settings: Any) -> str:
    """``sqlite`` or ``redis`` (a distributed crawl keeps its state in Redis whatever this says)."""
    backend = str(setting(settings, "IDCRAWL_STATE_BACKEND"))
    return "redis" if distributed(settings) else backend


def needs_redis(settings: Any) -> tuple[str, str] | None:
    """The setting that makes a crawl need Redis and its value as shown in an error line, or None."""
    if distributed(settings):
        name = "IDCRAWL_DISTRIBUTED"
        profile = given(settings, "IDCRAWL_PROFILE")
        return name, f"{given(settings, name)!r}" + (f" (from IDCRAWL_PROFILE={profile!r})" if profile else "")
    if state_backend(settings) == "redis":
        return "IDCRAWL_STATE_BACKEND", repr(given(settings, "IDCRAWL_STATE_BACKEND"))
    return None
