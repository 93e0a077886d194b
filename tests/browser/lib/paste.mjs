// Paste helpers shared by paste.test.mjs and paste-bench.mjs: synthesized PNGs and a synthesized
// ClipboardEvent carrying a File.
import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function chunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}

/// A valid RGB PNG of about `bytes` bytes: noise from `seed` (incompressible, like a photo),
/// stored with deflate level 0 so its size is predictable.
export function makePng(bytes, seed = 1) {
  const width = 1024;
  const height = Math.max(1, Math.ceil(bytes / (width * 3 + 1)));
  const raw = Buffer.alloc(height * (width * 3 + 1));
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < raw.length; i++) {
    // xorshift32: cheap deterministic noise.
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    raw[i] = i % (width * 3 + 1) === 0 ? 0 : x & 0xff;
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; ihdr[9] = 2; // 8-bit RGB
  return Buffer.concat([
    Buffer.from('\x89PNG\r\n\x1a\n', 'latin1'),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw, { level: 0 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

export const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');

/// Puts `bytes` into the page as `window.__pasteFile` (once per content: large files take time).
export async function loadFile(page, bytes, name = 'screenshot.png', type = 'image/png') {
  await page.evaluate(({ b64, name, type }) => {
    const bin = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    window.__pasteFile = new File([bin], name, { type });
  }, { b64: bytes.toString('base64'), name, type });
}

/// Dispatches `times` paste events carrying `window.__pasteFile`, as a browser does for a
/// pasted screenshot (a ClipboardEvent whose DataTransfer holds a File).
export async function pasteLoaded(page, times = 1) {
  await page.evaluate((times) => {
    for (let i = 0; i < times; i++) {
      const dt = new DataTransfer();
      dt.items.add(window.__pasteFile);
      const ev = new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true });
      (document.activeElement || document.body).dispatchEvent(ev);
    }
  }, times);
}

export async function pasteFile(page, bytes, opts = {}) {
  await loadFile(page, bytes, opts.name, opts.type);
  await pasteLoaded(page, opts.times ?? 1);
}
