"""The text-safety helpers: secrets masked, control characters escaped, names checked."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.safetext import MASK, escape_text, mask_secrets, mask_url, name_problem, safe


def test_a_redis_password_is_masked_and_the_rest_kept() -> None:
    assert mask_url("redis://:s3cret@db.example:6379/0") == f"redis://:{MASK}@db.example:6379/0"
    assert mask_url("rediss://user:s3cret@db:6380") == f"rediss://user:{MASK}@db:6380"
    assert mask_url("https://token@git.example/x") == f"https://{MASK}@git.example/x"
    assert mask_url("https://host/path?q=a@b") == "https://host/path?q=a@b"


def test_every_url_in_a_text_is_masked() -> None:
    text = "Redis at REDIS_URL=redis://:pw1@h:1/0 does not answer; proxy http://u:pw2@p:8080 too"
    masked = mask_secrets(text)
    assert "pw1" not in masked and "pw2" not in masked
    assert masked.count(MASK) == 2


def test_a_password_holding_an_at_sign_is_masked_whole() -> None:
    assert mask_url("redis://:p@ss@host:6379") == f"redis://:{MASK}@host:6379"


def test_control_characters_and_line_breaks_are_escaped() -> None:
    assert escape_text("t\n2026-01-01 [x] INFO: forged") == "t\\n2026-01-01 [x] INFO: forged"
    assert escape_text("\x1b[2J\x07") == "\\x1b[2J\\x07"
    assert escape_text("a\u2028b\x85") == "a\\u2028b\\x85"
    assert escape_text("plain text, ünïcode") == "plain text, ünïcode"


@settings(max_examples=300, derandomize=True)
@given(st.text())
def test_safe_text_is_always_one_printable_line(text: str) -> None:
    out = safe(text)
    assert out.isprintable()


@settings(max_examples=300, derandomize=True)
@given(st.text(alphabet=st.characters(blacklist_characters="@/?#", blacklist_categories=("Zs", "Cc")), min_size=1))
def test_no_password_survives_masking(password: str) -> None:
    out = safe(f"could not reach redis://:{password}@host:6379/0")
    assert f":{escape_text(password)}@" not in out or escape_text(password) == MASK


def test_names_are_printable_bounded_and_trimmed() -> None:
    assert name_problem("sirup2017") is None
    assert name_problem("a b") is None
    assert name_problem("") is not None
    assert name_problem("x\n2026") is not None
    assert name_problem("x\x1b[2J") is not None
    assert name_problem(" x") is not None
    assert name_problem("x" * 201) is not None
    assert name_problem(5) is not None


def test_a_netloc_quoted_alone_has_its_password_masked() -> None:
    """Twisted's "invalid hostname: user:password@host" quotes no scheme."""
    assert mask_secrets("invalid hostname: u:s3cret@127.0.0.1") == f"invalid hostname: u:{MASK}@127.0.0.1"
    assert mask_secrets("('u:s3cret@host')") == f"('u:{MASK}@host')"
    assert mask_secrets("https://host/path?q=a:b@c") == "https://host/path?q=a:b@c"  # a query is no netloc
    assert mask_secrets("write to ops@example.org") == "write to ops@example.org"


@settings(max_examples=300, derandomize=True)
@given(st.text())
def test_escaped_text_is_always_xml_compatible(text: str) -> None:
    from lxml import etree

    etree.Element("x", a=escape_text(text)).text = escape_text(text)  # lxml raises on what XML cannot hold


def test_where_redis_is_is_described_with_its_password_masked() -> None:
    from idcrawl.distributed.connection import describe

    assert describe({"REDIS_URL": "redis://:s3cret@db:6379/0"}) == f"REDIS_URL='redis://:{MASK}@db:6379/0'"
    assert describe({"REDIS_URL": "rediss://user:s3cret@db:6380"}) == f"REDIS_URL='rediss://user:{MASK}@db:6380'"
    assert describe({}) == "REDIS_URL unset (REDIS_HOST='localhost', REDIS_PORT=6379)"


def test_idjob_status_shows_a_lane_of_an_unprintable_name_on_one_escaped_line() -> None:
    from idcrawl.distributed.status import render_status

    counts = dict.fromkeys(("found", "missing", "failed", "emitted", "overshoot"), 0)
    lane = {"key": "t\n2026 [x] INFO: forged\x1b[2J:asc", "cut_at": None, "reason": None, "first_undecided": 5,
            "in_flight": 0, "counts": counts, "settled": False}
    text = render_status({"job": "idcrawl:{j}:", "finished": False, "workers": [], "waiting": {}, "lanes": [lane]})
    lines = text.splitlines()
    assert len(lines) == 4 and all(line.isprintable() for line in lines)
    assert lines[-1].startswith("  t\\n2026 [x] INFO: forged\\x1b[2J:asc: at 5;")
