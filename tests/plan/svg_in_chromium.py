"""`skainet plan --svg` opened in a real browser: headless Chromium screenshots the drawing, and the
PNG must show it (many non-white pixels, the drawing's colours), not a blank or broken-image page.

    svg_in_chromium.py SKAINET MODEL WORKDIR

A missing Chromium fails the test, never skips it (scripts/setup.sh installs Debian's `chromium`).
Chromium runs with a private --user-data-dir under WORKDIR and a timeout, so it neither touches a
profile elsewhere nor hangs the suite. The PNG is decoded here (zlib + numpy), without Pillow.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
import zlib

import numpy as np

SKAINET, MODEL, WORKDIR = sys.argv[1], sys.argv[2], sys.argv[3]
CHROMIUM_TIMEOUT_S = 90


def decode_png(data):
    """RGB(A) 8-bit non-interlaced PNG -> uint8 array [h, w, channels]."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, f"unexpected PNG format {header}"
    channels = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * channels)
    out = np.zeros((height, width * channels), dtype=np.int32)
    prev = np.zeros(width * channels, dtype=np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 0:
            row = line
        elif kind == 2:
            row = (line + prev) & 0xFF
        else:  # Sub, Average and Paeth depend on the pixel to the left: one pixel at a time
            row = np.zeros_like(line)
            for x in range(line.size):
                a = row[x - channels] if x >= channels else 0
                b = prev[x]
                c = prev[x - channels] if x >= channels else 0
                if kind == 1:
                    pred = a
                elif kind == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                row[x] = (line[x] + pred) & 0xFF
        out[y] = row
        prev = row
    return out.reshape(height, width, channels).astype(np.uint8)[:, :, :3]


class SvgInChromium(unittest.TestCase):
    def test_the_plan_drawing_renders(self):
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        self.assertIsNotNone(chromium, "chromium is not installed (scripts/setup.sh installs it)")
        os.makedirs(WORKDIR, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=WORKDIR) as tmp:
            svg = os.path.join(tmp, "plan.svg")
            # The feed-forward weights copied, the rest mapped: both kinds of weight in the drawing.
            plan = subprocess.run([SKAINET, "plan", MODEL, "--budget", "8M", "--override-tensor", "ffn=keep,heap",
                                   "--override-tensor", ".=keep,mapped", "--svg", svg],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(plan.returncode, 0, plan.stderr)
            root = ET.parse(svg).getroot()
            self.assertEqual(root.tag, "{http://www.w3.org/2000/svg}svg")

            png = os.path.join(tmp, "shot.png")
            cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                   "--no-first-run", "--no-default-browser-check",
                   f"--user-data-dir={os.path.join(tmp, 'profile')}",
                   f"--screenshot={png}", "--window-size=1200,900", "file://" + os.path.abspath(svg)]
            shot = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S)
            self.assertEqual(shot.returncode, 0, shot.stderr[-4000:])
            self.assertTrue(os.path.exists(png), "chromium wrote no screenshot: " + shot.stderr[-4000:])
            with open(png, "rb") as f:
                pixels = decode_png(f.read())
            if os.environ.get("SKAINET_KEEP_SCREENSHOT"):
                shutil.copy(png, os.environ["SKAINET_KEEP_SCREENSHOT"])

        self.assertEqual(pixels.shape[:2], (900, 1200))
        not_white = np.any(pixels < 245, axis=2)
        # The bars, the layer strip, the chart's lines and the text cover a good part of the canvas.
        self.assertGreater(not_white.mean(), 0.05, "the screenshot is (nearly) blank")
        colours = {tuple(int(v) for v in c) for c in pixels.reshape(-1, 3)[::7]}
        self.assertGreater(len(colours), 20, "too few distinct colours for the drawing")
        # The drawing's own fills: pinned red (#c0392b), evictable green (#27ae60), KV blue (#2980b9).
        for name, rgb in {"pinned": (0xc0, 0x39, 0x2b), "evictable": (0x27, 0xae, 0x60),
                          "kv cache": (0x29, 0x80, 0xb9)}.items():
            near = np.all(np.abs(pixels.astype(np.int32) - np.array(rgb)) <= 8, axis=2)
            self.assertGreater(int(near.sum()), 2000, f"no {name} fill in the screenshot")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
