// Pictures for the browser tests of images (images.test.mjs, share-images.test.mjs): a PNG of
// four coloured quadrants, and the check that the page drew it (the screenshot's colours under
// the picture's cells).
import assert from 'node:assert/strict';
import { deflateSync } from 'node:zlib';
import { until } from './helpers.mjs';

// A PNG of four coloured quadrants, `w` × `h` pixels.
export const QUADRANTS = [[230, 30, 30], [30, 200, 40], [40, 60, 230], [240, 210, 20]];
export function quadrantPng(w, h) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    out.write(type, 4, 'ascii');
    data.copy(out, 8);
    out.writeUInt32BE(crc(out.subarray(4, 8 + data.length)), 8 + data.length);
    return out;
  };
  const raw = Buffer.alloc((w * 3 + 1) * h);
  for (let y = 0; y < h; y++) {
    raw[y * (w * 3 + 1)] = 0;
    for (let x = 0; x < w; x++) {
      const q = QUADRANTS[(y < h / 2 ? 0 : 2) + (x < w / 2 ? 0 : 1)];
      raw.set(q, y * (w * 3 + 1) + 1 + x * 3);
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0)),
  ]);
}

/// The screenshot's colours at points of the page (CSS pixels): decoded in the page itself.
export async function colorsAt(context, page, points) {
  const shot = (await page.screenshot()).toString('base64');
  // In a blank page of its own: the terminal's page allows no data: images (its CSP).
  const blank = await context.newPage();
  const width = await page.evaluate(() => window.innerWidth);
  try {
    return await blank.evaluate(async ({ shot, points, width }) => {
    const img = new Image();
    img.src = `data:image/png;base64,${shot}`;
    await img.decode();
    const c = document.createElement('canvas');
    [c.width, c.height] = [img.width, img.height];
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    const scale = img.width / width;
    return points.map(([x, y]) => [...g.getImageData(Math.round(x * scale), Math.round(y * scale), 1, 1).data].slice(0, 3));
    }, { shot, points, width });
  } finally {
    await blank.close();
  }
}

/// Checks the quadrants' colours under image `id`'s decoration (fitted, keeping its shape, at the
/// top left of its cells).
export async function assertQuadrants(context, page, id, w, h) {
  // The decoration's element shown now (xterm.js hides those off the viewport; a picture placed
  // again leaves its old element behind for a moment).
  const box = await until(() => page.evaluate((id) => {
    for (const el of document.querySelectorAll(`.tern-image[data-image="${id}"]`)) {
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.height > 0 && el.querySelector('img')?.complete) return { x: r.x, y: r.y, width: r.width, height: r.height };
    }
    return null;
  }, id), { what: `image ${id} shown` });
  const scale = Math.min(box.width / w, box.height / h);
  const points = [[0.25, 0.25], [0.75, 0.25], [0.25, 0.75], [0.75, 0.75]]
    .map(([fx_, fy]) => [box.x + fx_ * w * scale, box.y + fy * h * scale]);
  const got = await colorsAt(context, page, points);
  got.forEach((rgb, i) => {
    const want = QUADRANTS[i];
    assert.ok(rgb.every((v, k) => Math.abs(v - want[k]) <= 12), `quadrant ${i}: ${rgb} vs ${want} (box ${JSON.stringify(box)})`);
  });
}
