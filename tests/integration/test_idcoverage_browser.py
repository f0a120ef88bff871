"""The page ``scrapy idcoverage`` writes as a real browser (headless Chromium) renders it."""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path

import pytest

from idcrawl.commands.coverage import html_document
from tests.support.states import write_known_state
from tests.unit.test_idcoverage import _views


@pytest.fixture
def known(tmp_path: Path) -> Path:
    return write_known_state(tmp_path / "state" / "idcrawl-state.sqlite")


def _png_pixels(data: bytes) -> list[tuple[int, int, int]]:
    """The RGB pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    pos, chunks, header = 8, [], b""
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    depth, colour, interlace = header[8], header[9], header[12]
    assert depth == 8 and colour in (2, 6) and interlace == 0
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(chunks)), width * bpp
    pixels: list[tuple[int, int, int]] = []
    previous = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        pixels += [tuple(line[x:x + 3]) for x in range(0, stride, bpp)]  # type: ignore[misc]
        previous = line
    return pixels


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="no /usr/bin/chromium")
def test_a_browser_renders_the_page(known: Path, tmp_path: Path) -> None:
    (tmp_path / "map.html").write_bytes(html_document(_views(known, "seed")))
    shot = tmp_path / "shot.png"
    subprocess.run(
        ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--screenshot={shot}", "--window-size=1200,320", "--force-device-scale-factor=0.5",
         f"--user-data-dir={tmp_path / 'profile'}", (tmp_path / "map.html").as_uri()],
        capture_output=True, timeout=60, check=False,
    )
    pixels = _png_pixels(shot.read_bytes())
    # seed: found 3-4, 7-8, 10-12 (7 of 12 axis ids) and missing 5-6, 9 (3 ids), over a 1000 px axis at half scale
    green = sum(1 for p in pixels if p == (0x2F, 0x9E, 0x44))
    grey = sum(1 for p in pixels if p == (0x86, 0x8E, 0x96))
    assert green > 1500 and 2 * grey < green < 3 * grey  # 7 found ids to 3 missing
