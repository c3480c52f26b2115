#!/usr/bin/env python3
"""Draws icons/icon{16,32,48,128}.png (orange #FF4500 rounded square, white arrow).
Standard library only: run `python3 tools/make_icons.py` from extension/."""
import os, struct, zlib

ORANGE, WHITE = (0xFF, 0x45, 0x00), (0xFF, 0xFF, 0xFF)

def inside_square(x, y, r=0.22):
    # Rounded square covering [0,1]^2 with corner radius r.
    cx, cy = min(max(x, r), 1 - r), min(max(y, r), 1 - r)
    return (x - cx) ** 2 + (y - cy) ** 2 <= r * r

def inside_arrow(x, y):
    shaft = 0.17 <= x <= 0.56 and 0.41 <= y <= 0.59
    # Head: triangle with base at x=0.50 (y 0.22..0.78) and tip at (0.84, 0.5).
    head = 0.50 <= x <= 0.84 and abs(y - 0.5) <= 0.28 * (0.84 - x) / 0.34
    return shaft or head

def pixel(px, py, size, ss=4):
    bg = fg = 0
    for i in range(ss):
        for j in range(ss):
            x, y = (px + (i + 0.5) / ss) / size, (py + (j + 0.5) / ss) / size
            if inside_square(x, y):
                bg += 1
                fg += inside_arrow(x, y)
    n = ss * ss
    alpha = bg / n
    if bg == 0:
        return (0, 0, 0, 0)
    t = fg / bg
    rgb = tuple(round(o * (1 - t) + w * t) for o, w in zip(ORANGE, WHITE))
    return rgb + (round(alpha * 255),)

def png(size):
    rows = b''.join(b'\0' + b''.join(bytes(pixel(x, y, size)) for x in range(size)) for y in range(size))
    chunk = lambda tag, data: struct.pack('>I', len(data)) + tag + data + struct.pack('>I', zlib.crc32(tag + data))
    ihdr = struct.pack('>IIBBBBB', size, size, 8, 6, 0, 0, 0)
    return b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', ihdr) + chunk(b'IDAT', zlib.compress(rows, 9)) + chunk(b'IEND', b'')

if __name__ == '__main__':
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'icons')
    os.makedirs(out, exist_ok=True)
    for size in (16, 32, 48, 128):
        with open(os.path.join(out, f'icon{size}.png'), 'wb') as f:
            f.write(png(size))
