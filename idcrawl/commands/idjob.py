"""``scrapy idjob status|push|clean|incidents``: a distributed job in Redis.

The job is found as the workers find it (``REDIS_URL``, ``IDCRAWL_REDIS_PREFIX``, ``IDCRAWL_REDIS_JOB``);
the subcommands: docs/architecture.md, "Module notes" and docs/distributed.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from idcrawl.commands._common import PlainHelpFormatter, apply_command_profile, redis_address
from idcrawl.config import config_from
from idcrawl.core.inputs import TargetError
from idcrawl.core.safetext import safe
from idcrawl.state.base import StateError
from idcrawl.state.keys import JobKeys
from idcrawl.state.redis import redis_now_ms

__all__ = ["Command"]

ACTIONS = ("status", "push", "clean", "incidents")


class Command(ScrapyCommand):
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "status|push|clean|incidents [ARGS] [--spider NAME] [--json] [--force] [-o FILE]"

    def short_desc(self) -> str:
        return "Show, feed, export the incidents of, or clean up a distributed job in Redis"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.formatter_class = PlainHelpFormatter
        parser.add_argument("--spider", metavar="NAME", default="idseq",
                            help="the job's spider (its name is the job's default name; default: idseq)")
        parser.add_argument("--json", action="store_true", help="status: print a JSON document")
        parser.add_argument("--force", action="store_true", help="clean: even while workers are alive")
        parser.add_argument("-o", "--output", metavar="FILE", help="incidents: the XML incident log to append to")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args or args[0] not in ACTIONS:
            raise UsageError(f"give one of {', '.join(ACTIONS)}", print_help=False)
        from idcrawl.distributed.connection import RedisUnavailable, connect, job_prefix

        if not apply_command_profile(self, "idjob"):
            return
        try:
            self.client = connect(self.settings)
        except RedisUnavailable as exc:
            self._fail(str(exc))
            return
        self.prefix = job_prefix(self.settings, opts.spider)
        self.keys = JobKeys(self.prefix)
        print(f"idjob: reading Redis job {safe(repr(self.prefix))} at {redis_address(self.settings)}",
              file=sys.stderr if opts.json else sys.stdout, flush=True)  # stdout stays JSON under --json
        action, rest = args[0], args[1:]
        try:
            getattr(self, f"_{action}")(rest, opts)
        except (TargetError, ValueError, OSError, RedisUnavailable, StateError) as exc:  # StateError: damaged job keys
            self._fail(str(exc))

    def _fail(self, message: str) -> None:
        print(f"idjob: error: {safe(message)}", file=sys.stderr)
        self.exitcode = 1

    # -- status ----------------------------------------------------------------------

    def _status(self, rest: list[str], opts: argparse.Namespace) -> None:
        from idcrawl.distributed.status import job_status, render_status

        document = job_status(self.client, self.prefix, self._lease())
        if opts.json:
            sys.stdout.write(json.dumps(document, indent=2) + "\n")
        else:
            sys.stdout.write(render_status(document))

    def _lease(self) -> float:
        assert self.settings is not None
        return config_from(self.settings).redis_lease_timeout

    # -- push --------------------------------------------------------------------------

    def _push(self, rest: list[str], opts: argparse.Namespace) -> None:
        from idcrawl.distributed.connection import check_no_eviction
        from idcrawl.distributed.worker import parse_pushed

        if not rest:
            raise UsageError("push needs a JSON file (or - for stdin)", print_help=False)
        assert self.settings is not None
        defaults = config_from(self.settings).target_defaults()
        warning = check_no_eviction(self.client, self.settings)  # pushed targets are kept in Redis: no eviction
        if warning:
            print(f"idjob: warning: {warning}", file=sys.stderr)
        entries = []
        for source in rest:
            text = sys.stdin.read() if source == "-" else open(source, encoding="utf-8").read()  # noqa: SIM115
            try:
                targets = parse_pushed(text, defaults)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{source}: not JSON ({exc})") from None
            except TargetError as exc:
                raise ValueError(f"{source}: {exc}") from None
            entries.append(text.strip())
            for target in targets:
                shown = f"{target.name!r} ({target.url}) to {self.keys.feed}"
                print(f"idjob: pushing target {safe(shown)}")
        self.client.rpush(self.keys.feed, *entries)

    # -- clean ---------------------------------------------------------------------------

    def _clean(self, rest: list[str], opts: argparse.Namespace) -> None:
        from idcrawl.distributed.connection import scan_job

        now_ms = redis_now_ms(self.client, self.keys.workers)
        alive = self.client.zrangebyscore(self.keys.workers, now_ms - self._lease() * 1000, "+inf")
        if alive and not opts.force:
            raise ValueError(f"{len(alive)} worker(s) of {self.prefix!r} are alive; stop them or give --force")
        from idcrawl.state.lock import state_owner

        owner = state_owner(self.client, self.keys.owner)
        if owner is not None and not opts.force:
            raise ValueError(f"{self.prefix!r} is in use by a single-process crawl (held by {owner}); "
                             "stop it or give --force")
        deleted = 0
        for batch in _batches(scan_job(self.client, self.keys.all_pattern(), 1000), 500):
            deleted += int(self.client.delete(*batch))
        print(f"idjob: deleted {deleted} keys of {safe(repr(self.prefix))}")

    # -- incidents ------------------------------------------------------------------------

    def _incidents(self, rest: list[str], opts: argparse.Namespace) -> None:
        from idcrawl.distributed.incidents import drain_incidents

        if not opts.output:
            raise UsageError("incidents needs -o FILE (the XML incident log)", print_help=False)
        moved = drain_incidents(self.client, self.prefix, opts.output)
        print(f"idjob: {moved} incidents moved to {safe(opts.output)}")


def _batches(items: Any, size: int) -> Any:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
