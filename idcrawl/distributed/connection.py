"""Connecting to a job's Redis: scrapy-redis's connection settings, one clear error.

The client (``REDIS_URL``, ``REDIS_PARAMS``, ...), the job's key prefix ``<IDCRAWL_REDIS_PREFIX>:{<job>}:``,
the ``noeviction`` check, and :func:`count_calls`, which counts every call in the crawl's stats.
docs/distributed.md ("Redis configuration", "Key layout and Redis Cluster"); docs/architecture.md
("Module notes").
"""

from __future__ import annotations

import hashlib
from typing import Any

from idcrawl.config import given, setting
from idcrawl.core.safetext import mask_secrets, safe

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


def connect(settings: Any, *, idempotent: bool = False, stats: Any = None) -> Any:
    """The client the settings ask for (:func:`_client`: a ``redis.Redis``, or a ``redis.cluster.RedisCluster``),
    checked: PING, and every master's version (Lua and TIME needed: Redis >= 5).

    ``idempotent``: every call the caller makes may be sent twice (the single-process state
    store's commits merge, reads are reads), so redis-py may retry a call briefly.
    ``stats``: a Scrapy stats collector that counts every call of the client (:func:`count_calls`),
    the ones of the check included.
    """
    try:
        import redis
    except ImportError as exc:  # pragma: no cover - the 'distributed' extra is missing
        raise RedisUnavailable(f"{exc.name} is not installed: pip install 'idcrawl[distributed]'") from None
    try:
        client = _client(settings)
        if "retry" not in settings.getdict("REDIS_PARAMS"):
            # a worker's calls get no retry inside a call: the job's scripts are not idempotent (a CLAIM
            # whose reply was lost and that redis-py sent again would leave the first block claimed and
            # unknown), and a retry would block the reactor. A failed call surfaces as an outage; the
            # worker's poll retries, then reconciles what the cut replies did (idcrawl.distributed.worker).
            # (A cluster client retries at its own level, its nodes' connections never: the same call.)
            from redis.backoff import ExponentialBackoff, NoBackoff
            from redis.retry import Retry

            if idempotent:
                client.set_retry(Retry(ExponentialBackoff(cap=0.5, base=0.05), 3))
            else:
                client.set_retry(Retry(NoBackoff(), 0))
        if stats is not None:
            count_calls(client, stats)
        client.ping()
        infos = [client.info(**node) for node in masters(client)]  # the default sections: server, cluster, ...
    except (redis.RedisError, OSError, ValueError, _cluster_error()) as exc:
        raise RedisUnavailable(f"Redis at {describe(settings)} is unreachable: {safe(exc)}") from None
    for info in infos:
        version = str(info.get("redis_version", "0"))
        if int(version.split(".")[0]) < 5:
            raise RedisUnavailable(f"Redis at {describe(settings)} is version {version}; idcrawl needs 5 or later")
        if str(info.get("cluster_enabled", 0)) == "1" and not is_cluster(client):
            raise RedisUnavailable(f"Redis at {describe(settings)} is a node of a Redis Cluster: set "
                                   "IDCRAWL_REDIS_CLUSTER = True (docs/distributed.md, Redis Cluster)")
    return client


def _client(settings: Any) -> Any:
    """The client the settings ask for, not checked yet (:func:`connect` checks it).

    Plain: scrapy-redis's (``REDIS_URL`` or ``REDIS_HOST``/``REDIS_PORT``, ``REDIS_PARAMS``), a ``redis.Redis``.
    ``IDCRAWL_REDIS_CLUSTER``: a ``redis.cluster.RedisCluster`` from the same settings; ``REDIS_URL`` names
    any node of the cluster (the client learns the others from it), database 0 only.
    ``IDCRAWL_REDIS_SENTINELS``: the primary the sentinels name (:mod:`idcrawl.distributed.sentinel`).
    """
    from scrapy_redis.connection import get_redis_from_settings

    from idcrawl.distributed.sentinel import sentinel_client

    cluster = setting(settings, "IDCRAWL_REDIS_CLUSTER")
    sentinel = sentinel_client(settings)
    if sentinel is not None:
        if cluster:
            raise RedisUnavailable("IDCRAWL_REDIS_CLUSTER = True and IDCRAWL_REDIS_SENTINELS are both set: a Redis "
                                   "Cluster fails over by itself, without sentinels; set one of them")
        return sentinel
    if not cluster:
        return get_redis_from_settings(settings)
    import redis
    from redis.cluster import RedisCluster
    from redis.connection import parse_url

    if int(redis.__version__.split(".")[0]) < 6:  # cluster pipelines with WATCH/MULTI came in redis-py 6
        raise RedisUnavailable(f"IDCRAWL_REDIS_CLUSTER = True needs redis-py 6 or later, not {redis.__version__}: "
                               f"pip install 'redis>=6'")
    params = settings.getdict("REDIS_PARAMS")
    url = settings.get("REDIS_URL")
    db = params.get("db") or settings.get("REDIS_DB") or (parse_url(url).get("db") if url else 0)  # type: ignore[no-untyped-call]
    if db and int(db) != 0:
        raise RedisUnavailable(f"IDCRAWL_REDIS_CLUSTER = True but {describe(settings)} asks for database {db}: "
                               f"a Redis Cluster has database 0 only")
    from scrapy.settings import Settings

    # scrapy-redis's reading of the settings, its client class swapped (a database other than 0 refused above)
    cluster_settings = Settings({name: settings.get(name) for name in _CLIENT_SETTINGS})
    cluster_settings.set("REDIS_PARAMS", {**{k: v for k, v in params.items() if k != "db"}, "redis_cls": RedisCluster})
    try:
        return _outages_as_connection_errors(get_redis_from_settings(cluster_settings))
    except _cluster_error() as exc:
        if "not enabled" in str(exc):  # "Cluster mode is not enabled on this node"
            raise RedisUnavailable(
                f"IDCRAWL_REDIS_CLUSTER = True but Redis at {describe(settings)} is not a node of a Redis Cluster "
                f"(cluster_enabled:0): set IDCRAWL_REDIS_CLUSTER = False, or name a node of the cluster") from None
        raise


#: The settings scrapy-redis makes its client from, but ``REDIS_DB`` (a cluster has database 0 only).
_CLIENT_SETTINGS = ("REDIS_URL", "REDIS_HOST", "REDIS_PORT", "REDIS_ENCODING", "REDIS_DECODE_RESPONSES")


def _outages_as_connection_errors(client: Any) -> Any:
    """A cluster client whose "no node reachable" (a ``RedisClusterException``, not a ``RedisError``) is a
    ``redis.ConnectionError``: an outage, as a plain client's; its other errors as they are (its calls and its
    pipelines' are wrapped in place)."""
    import redis
    from redis.exceptions import RedisClusterException

    def guarded(call: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return call(*args, **kwargs)
            except RedisClusterException as exc:
                if isinstance(exc.__cause__, (redis.ConnectionError, redis.TimeoutError, OSError)):
                    raise redis.ConnectionError(str(exc)) from exc
                raise

        return run

    make_pipeline = client.pipeline

    def pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = make_pipeline(*args, **kwargs)
        for name in ("execute_command", "execute", "watch", "delete", "unlink"):
            setattr(pipe, name, guarded(getattr(pipe, name)))
        return pipe

    client.execute_command, client.pipeline = guarded(client.execute_command), pipeline
    return client


def _cluster_error() -> type[Exception]:
    """redis-py's cluster error that is not a ``RedisError`` (no reachable node, a node not in cluster mode)."""
    from redis.exceptions import RedisClusterException

    return RedisClusterException


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is a Redis Cluster client (``IDCRAWL_REDIS_CLUSTER``)."""
    from redis.cluster import RedisCluster

    return isinstance(client, RedisCluster)


def masters(client: Any) -> list[dict[str, Any]]:
    """Keyword arguments that send a server command (``INFO``, ``CONFIG GET``) to each master of a cluster, one
    call each (``target_nodes``); ``[{}]``, one call to its server, for a plain client."""
    if is_cluster(client):
        return [{"target_nodes": node} for node in client.get_primaries()]
    return [{}]


def scan_job(client: Any, pattern: str, count: int) -> Any:
    """The keys matching ``pattern``, one of a job's (its hash tag in it): ``SCAN`` on the master of the job's
    slot only on a cluster (the other masters hold other jobs, never one of this job's keys)."""
    if is_cluster(client):
        return client.scan_iter(match=pattern, count=count, target_nodes=client.get_node_from_key(pattern))
    return client.scan_iter(match=pattern, count=count)


#: The one ``maxmemory-policy`` that never deletes a key to make room.
NO_EVICTION = "noeviction"
def check_no_eviction(client: Any, settings: Any) -> str | None:
    """Refuse a Redis whose ``maxmemory-policy`` may evict keys (anything but ``noeviction``; on a cluster, any
    master's): an evicted lane or set loses ids silently. Raises :class:`RedisUnavailable` (one line). Returns
    a warning to show when ``CONFIG GET`` is not allowed (renamed, an ACL, a managed Redis): the caller goes
    on; else None."""
    import redis

    where = mask_secrets(describe(settings))
    for node in masters(client):  # on a cluster, every master: the job's keys may live on any of them
        try:
            reply = client.config_get("maxmemory-policy", **node)
        except redis.ResponseError as exc:  # NoPermissionError too; unknown command when CONFIG is renamed
            return (f"the maxmemory-policy of Redis at {where} cannot be read ({mask_secrets(str(exc))}): make sure "
                    f"it is {NO_EVICTION!r}, or keys of the job may be evicted and its ids lost")
        except (redis.RedisError, OSError, _cluster_error()) as exc:
            raise RedisUnavailable(f"Redis at {where} is unreachable: {mask_secrets(str(exc))}") from None
        policy = reply_text(next(iter(reply.values()), "")) if reply else ""
        if policy and policy != NO_EVICTION:
            at = f" (the cluster's master {node['target_nodes'].name})" if node else ""
            raise RedisUnavailable(
                f"Redis at {where}{at} has maxmemory-policy {policy!r}, which may evict the job's keys (lanes, "
                f"outcomes: ids lost): set it to {NO_EVICTION!r} (redis.conf, or CONFIG SET maxmemory-policy "
                f"{NO_EVICTION})")
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
    ``execute_command``), so every caller of the client is counted, a plain or a cluster client
    (a cluster pipeline's commands for several masters count as one call; a command sent to
    every master, one); returns the client.
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
        stage, run = pipe.execute_command, pipe.execute
        queued: list[tuple[Any, ...]] = []
        inside: list[str] = []  # a wrapped method runs (a plain pipeline's calls execute_command in turn)

        def note(command_args: tuple[Any, ...], was_queued: bool) -> None:
            if was_queued:  # for execute(): one round trip for all
                queued.append(command_args)
            else:  # sent at once: WATCH, a read between WATCH and MULTI
                count([command_args])

        # a pipeline's commands pass its execute_command, but for the few that redis-py's cluster pipeline
        # sends its own way (WATCH, DEL, UNLINK): those are wrapped by name
        def staged(*command_args: Any, **options: Any) -> Any:
            if inside:
                return stage(*command_args, **options)
            before = len(pipe)
            result = stage(*command_args, **options)
            note(command_args, len(pipe) > before)
            return result

        def by_name(method: Any, name: str) -> Any:
            def wrapped(*names: Any) -> Any:
                before = len(pipe)
                inside.append(name)
                try:
                    result = method(*names)
                finally:
                    inside.pop()
                note((name, *names), len(pipe) > before)
                return result

            return wrapped

        def counted_execute(*run_args: Any, **run_kwargs: Any) -> Any:
            if queued:
                count(queued[:])
                queued.clear()
            return run(*run_args, **run_kwargs)

        pipe.execute_command, pipe.execute = staged, counted_execute
        for name in ("watch", "delete", "unlink"):
            setattr(pipe, name, by_name(getattr(pipe, name), name.upper() if name != "delete" else "DEL"))
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
