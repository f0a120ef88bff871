"""The XML incident log: content, schema, escaping, keeping earlier runs, atomic writes, bad paths."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from lxml import etree

from idcrawl.core.limits import DomainLimits, Limits
from idcrawl.extensions.incidents import SCHEMA_PATH, Incident, IncidentLog, IncidentLogError, schema

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def parse(path: Path) -> etree._Element:
    root = etree.parse(str(path)).getroot()
    xsd = etree.XMLSchema(etree.parse(str(SCHEMA_PATH)))
    assert xsd.validate(root), xsd.error_log
    return root


def ttmax_incident(host: str = "a.example") -> Incident:
    domain = DomainLimits(Limits(ttmax=5), host)
    domain.take(0.0)
    domain.response(0.5, f"https://{host}/item/1")
    domain.response(0.6, f"https://{host}/item/2")
    trigger = domain.new_targets(1.0, count=7)
    assert trigger is not None
    return Incident.from_trigger(
        trigger, time=T0, counters=domain.counters(), cursors={"items:asc": 12, "items:desc": 3},
        urls=list(domain.recent_urls),
    )  # fmt: skip


def tdl_incident(host: str = "b.example") -> Incident:
    domain = DomainLimits(Limits(tdl=900.0), host)
    domain.take(10.0)
    trigger = domain.check(910.25)
    assert trigger is not None
    return Incident.from_trigger(trigger, time=T0, counters=domain.counters(), cursors={"pages:asc": None})


def test_schema_is_shipped_in_the_package() -> None:
    assert SCHEMA_PATH.is_file() and SCHEMA_PATH.parent.name == "schemas"
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"schemas/*.xsd"' in pyproject
    assert isinstance(schema(), etree.XMLSchema)


def test_ttmax_and_tdl_incidents_validate_and_hold_the_rule_limit_and_observed_value(tmp_path: Path) -> None:
    path = tmp_path / "job" / "incidents.xml"
    log = IncidentLog(path)
    assert not path.exists()  # nothing written before the first incident
    log.append(ttmax_incident())
    log.append(tdl_incident())
    root = parse(path)
    assert root.tag == "incidents" and root.get("version") == "1"
    ttmax, tdl = root.findall("incident")
    assert ttmax.get("time") == "2024-05-01T12:00:00.000000Z" and ttmax.get("level") == "domain"
    assert ttmax.get("kind") == "limit"
    assert [ttmax.findtext(n) for n in ("domain", "rule", "category", "limit", "observed", "unit")] == [
        "a.example", "TTmax", "secondary", "5", "7", "targets",
    ]  # fmt: skip
    assert "stopped by TTmax" in (ttmax.findtext("message") or "")
    counters = {c.get("name"): c.text for c in ttmax.iterfind("counters/counter")}
    assert counters["targets"] == "7" and counters["page_loads"] == "2" and counters["iterations"] == "1"
    assert {c.get("lane"): c.text for c in ttmax.iterfind("cursors/cursor")} == {"items:asc": "12", "items:desc": "3"}
    assert [u.text for u in ttmax.iterfind("urls/url")] == ["https://a.example/item/1", "https://a.example/item/2"]
    assert [tdl.findtext(n) for n in ("domain", "rule", "category", "limit", "observed", "unit")] == [
        "b.example", "TDL", "secondary", "900.0", "900.25", "seconds",
    ]  # fmt: skip
    assert tdl.find("cursors/cursor").text is None  # None: an empty element
    assert len(log) == 2


def test_an_error_incident_has_no_rule(tmp_path: Path) -> None:
    log = IncidentLog(tmp_path / "incidents.xml")
    log.append(Incident.error("a.example", "ZeroDivisionError in parse", time=T0, urls=["https://a.example/x"]))
    (incident,) = parse(log.path)
    assert incident.get("kind") == "error" and incident.find("rule") is None
    assert incident.findtext("message") == "ZeroDivisionError in parse"


def test_times_are_written_in_utc(tmp_path: Path) -> None:
    from datetime import timedelta, timezone

    log = IncidentLog(tmp_path / "incidents.xml")
    log.append(Incident.error("a", "m", time=datetime(2024, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))))
    assert parse(log.path)[0].get("time") == "2024-05-01T12:00:00.000000Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        Incident.error("a", "m", time=datetime(2024, 5, 1))


def test_a_log_with_earlier_incidents_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "incidents.xml"
    IncidentLog(path).append(ttmax_incident("first.example"))
    second = IncidentLog(path)  # a later run of the same job
    assert len(second) == 1
    second.append(tdl_incident("second.example"))
    assert [i.findtext("domain") for i in parse(path)] == ["first.example", "second.example"]


def test_urls_and_messages_are_escaped(tmp_path: Path) -> None:
    url = "https://a.example/search?q=<script>&x=\"1\"&y='2'&z=]]>"
    message = 'stopped by <TTmax> & "friends" \x00\x1b'
    log = IncidentLog(tmp_path / "incidents.xml")
    log.append(Incident.error("a&b.example", message, time=T0, urls=[url], cursors={'lane"<1>': "a&b"}))
    raw = log.path.read_bytes()
    assert b"<script>" not in raw and b"&lt;script&gt;" in raw and b"&amp;x=" in raw
    (incident,) = parse(log.path)
    assert incident.findtext("urls/url") == url
    assert incident.findtext("message") == 'stopped by <TTmax> & "friends" \\x00\\x1b'  # not XML characters
    assert incident.findtext("domain") == "a&b.example"
    assert incident.find("cursors/cursor").get("lane") == 'lane"<1>'


def test_only_the_last_urls_are_kept(tmp_path: Path) -> None:
    log = IncidentLog(tmp_path / "incidents.xml", max_urls=3)
    log.append(Incident.error("a", "m", time=T0, urls=[f"https://a/{i}" for i in range(10)]))
    assert [u.text for u in parse(log.path).iterfind("incident/urls/url")] == [
        "https://a/7",
        "https://a/8",
        "https://a/9",
    ]


def test_a_failed_replace_leaves_the_previous_document_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "incidents.xml"
    log = IncidentLog(path)
    log.append(ttmax_incident())
    before = path.read_bytes()

    def killed(*args: object) -> None:
        raise KeyboardInterrupt  # as if the process were stopped between write and rename

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        log.append(tdl_incident())
    monkeypatch.undo()
    assert path.read_bytes() == before and len(parse(path)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["incidents.xml"]
    assert len(log) == 1  # the lost incident is not kept in memory either
    log.append(tdl_incident())
    assert len(parse(path)) == 2


def test_a_disk_error_is_a_clear_error_and_keeps_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "incidents.xml"
    log = IncidentLog(path)
    log.append(ttmax_incident())

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(IncidentLogError, match=r"incidents\.xml'.*No space left on device"):
        log.append(tdl_incident())
    monkeypatch.undo()
    assert len(parse(path)) == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["incidents.xml"]


WRITER = """
import sys
from datetime import UTC, datetime
from idcrawl.extensions.incidents import Incident, IncidentLog
log = IncidentLog(sys.argv[1])
print("ready", flush=True)
for i in range(100000):
    log.append(Incident.error(f"d{i}.example", "x" * 2000 + " <&> " + str(i), time=datetime.now(UTC),
                              counters={"i": i}, urls=[f"https://d{i}.example/?a=1&b=<{j}>" for j in range(10)]))
"""


@pytest.mark.parametrize("delay", [0.3, 0.7, 1.1])
def test_a_writer_killed_while_writing_leaves_a_valid_file(tmp_path: Path, delay: float) -> None:
    path = tmp_path / "incidents.xml"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    root = parse(path)
    assert len(root) >= 1
    assert [int(i.findtext("counters/counter") or -1) for i in root] == list(range(len(root)))
    # the next run keeps what the killed one wrote (a stray temp file may stay beside the log)
    log = IncidentLog(path)
    log.append(ttmax_incident())
    assert len(parse(path)) == len(root) + 1


PAUSING_WRITER = """
import os, sys, time
from datetime import UTC, datetime
from idcrawl.extensions.incidents import Incident, IncidentLog
log = IncidentLog(sys.argv[1])
for i in range(3):
    log.append(Incident.error(f"d{i}.example", "done", time=datetime.now(UTC), counters={"i": i}))
real = getattr(os, sys.argv[2])
def pause(*args):
    print("paused", flush=True)
    time.sleep(60)
    return real(*args)
setattr(os, sys.argv[2], pause)
log.append(Incident.error("d3.example", "never renamed", time=datetime.now(UTC), counters={"i": 3}))
"""


@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_a_writer_killed_between_writing_and_renaming_leaves_the_previous_document(tmp_path: Path, step: str) -> None:
    path = tmp_path / "incidents.xml"
    proc = subprocess.Popen([sys.executable, "-c", PAUSING_WRITER, str(path), step], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "paused"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert [i.findtext("domain") for i in parse(path)] == ["d0.example", "d1.example", "d2.example"]
    (stray,) = (p for p in tmp_path.iterdir() if p != path)  # the new document, never renamed
    assert stray.name.startswith(".incidents.xml.") and stray.suffix == ".tmp"
    IncidentLog(path).append(tdl_incident())
    assert len(parse(path)) == 4


# -- bad paths ----------------------------------------------------------------------------


def test_a_file_that_is_not_a_log_is_an_error_and_is_not_overwritten(tmp_path: Path) -> None:
    cases = {
        "notes.txt": b"some notes, not XML",
        "other.xml": b"<?xml version='1.0'?><report><x/></report>",
        "broken.xml": b"<incidents version='1'><incident",
        "invalid.xml": b"<incidents version='1'><incident/></incidents>",
        "newer.xml": b"<incidents version='2'/>",
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(IncidentLogError, match=rf"^incident log '{path}': ") as info:
            IncidentLog(path)
        assert "not" in str(info.value) or "newer" in str(info.value)
        assert path.read_bytes() == content


def test_an_empty_file_is_a_new_log(tmp_path: Path) -> None:
    path = tmp_path / "incidents.xml"
    path.touch()
    log = IncidentLog(path)
    log.append(tdl_incident())
    assert len(parse(path)) == 1


def test_an_unwritable_path_is_an_error_at_construction(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(IncidentLogError, match=rf"^incident log '{blocker}/logs/incidents.xml': cannot be written"):
        IncidentLog(blocker / "logs" / "incidents.xml")
    with pytest.raises(IncidentLogError, match="is a directory"):
        IncidentLog(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_a_read_only_directory_is_an_error_at_construction(tmp_path: Path) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    directory.chmod(0o500)
    try:
        with pytest.raises(IncidentLogError, match=r"cannot be written.*Permission denied"):
            IncidentLog(directory / "incidents.xml")
    finally:
        directory.chmod(0o700)


def test_a_probe_that_fails_is_an_error_at_construction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same check as the read-only directory, for runs as root (which may write anywhere)."""
    import tempfile

    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(IncidentLogError, match=r"cannot be written \(Permission denied\)"):
        IncidentLog(tmp_path / "incidents.xml")


def test_passwords_of_urls_are_masked_in_every_field(tmp_path: Path) -> None:
    log = IncidentLog(tmp_path / "incidents.xml")
    log.append(Incident.error("a.example", "ValueError: invalid hostname: u:s3cret@a.example", time=T0,
                              cursors={"t:asc": "https://u:s3cret@a.example/9"}, urls=["https://u:s3cret@a.example/1"]))
    data = log.path.read_bytes()
    assert b"s3cret" not in data
    (incident,) = parse(log.path)
    assert incident.findtext("urls/url") == "https://u:***@a.example/1"
    assert incident.findtext("message") == "ValueError: invalid hostname: u:***@a.example"
