"""The replay harness against a real pywb (tests/support/wayback.py), on WARCs written as idcrawl's writer writes them.

WARC files made with warcio in the test (request/response pairs, a 304 revisit and an identical-payload-digest
revisit, one ``.warc.gz`` per rotation with a ``.cdxj`` beside it) go into a pywb collection with
``wb-manager add``; ``wayback`` serves it on a free 127.0.0.1 port. Each page replays with its body; a revisit
replays the body of the capture it refers to. pywb comes from its own venv (``make .venv-pywb/.installed``):
skipped without it, except under CI=true.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.warcs import Capture, check_warc, write_captures
from tests.support.wayback import wayback

SITE = "http://127.0.0.1:8123"
FIRST, SECOND = "2026-11-28T10:00:00Z", "2026-11-28T11:00:00Z"


def _bodies() -> dict[str, bytes]:
    return {f"{SITE}/item/{n}": f"<html><h1>item {n}</h1></html>".encode() for n in (1, 2, 3)} | {
        f"{SITE}/about": b"<html><p>linked page</p></html>"}


def test_pages_and_revisits_written_like_the_writer_replay_in_pywb(tmp_path: Path) -> None:
    warcs = tmp_path / "warc"
    warcs.mkdir()
    bodies = _bodies()
    first = warcs / "job-20261128100000-w1-00000.warc.gz"
    digests = write_captures(first, [Capture(url, FIRST, body, headers=(("Content-Type", "text/html"),
                                                                          ("ETag", f'"{i}"')))
                                     for i, (url, body) in enumerate(bodies.items())])
    # the second run: item/1 answers 304 (its block without HTTP headers), item/2 the same body again (200),
    # item/3 a new body
    item1, item2, item3 = (f"{SITE}/item/{n}" for n in (1, 2, 3))
    second = warcs / "job-20261128110000-w1-00000.warc.gz"
    new3 = b"<html><h1>item 3, changed</h1></html>"
    write_captures(second, [
        Capture(item1, SECOND, revisit="304", refers_date=FIRST, digest=digests[f"{item1} {FIRST}"],
                headers=(("ETag", '"0"'),), block_headers=False),
        Capture(item2, SECOND, bodies[item2], revisit="same", refers_date=FIRST, digest=digests[f"{item2} {FIRST}"]),
        Capture(item3, SECOND, new3),
    ])
    assert sorted(p.name for p in warcs.iterdir()) == sorted(
        [first.name, second.name, first.name + ".cdxj", second.name + ".cdxj"])
    assert check_warc(first) == [] and check_warc(second) == []

    with wayback(tmp_path / "pywb", sorted(warcs.glob("*.warc.gz"))) as server:
        for url, body in bodies.items():
            answer = server.replay(url, "20261128100000")
            assert (answer.status, answer.body) == (200, body), url
            assert answer.headers["Memento-Datetime"] == "Sat, 28 Nov 2026 10:00:00 GMT"
        # the revisits replay the body they refer to, dated at the second run
        for url in (item1, item2):
            answer = server.replay(url, "20261128110000")
            assert (answer.status, answer.body) == (200, bodies[url]), url
            assert answer.headers["Memento-Datetime"] == "Sat, 28 Nov 2026 11:00:00 GMT", url
        assert server.replay(item3, "20261128110000").body == new3
        assert [c["mime"] for c in server.captures(item1)] == ["text/html", "warc/revisit"]
        # a URL never captured is not in the collection
        assert server.replay(f"{SITE}/item/4", "20261128110000").status == 404


def test_a_304_revisit_that_keeps_the_304_headers_replays_as_an_empty_304(tmp_path: Path) -> None:
    """Why a 304 revisit must not carry the 304's status line in its block: pywb 2.10 then answers the
    revisit's moment with that 304 and no body (its resolvingloader treats a 3xx revisit as a redirect
    and loads no payload), not with the stored body."""
    url = f"{SITE}/item/1"
    warc = tmp_path / "a.warc.gz"
    body = b"<html>one</html>"
    digest = write_captures(warc, [Capture(url, FIRST, body)])[f"{url} {FIRST}"]
    later = tmp_path / "b.warc.gz"
    write_captures(later, [Capture(url, SECOND, revisit="304", refers_date=FIRST, digest=digest, block_headers=True)])
    with wayback(tmp_path / "pywb", [warc, later]) as server:
        assert (server.replay(url, "20261128100000").body) == body
        answer = server.replay(url, "20261128110000")
        assert (answer.status, answer.body) == (304, b"")
