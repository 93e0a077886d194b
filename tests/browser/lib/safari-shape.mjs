// Safari's datagram API shape in Chromium, for safari-shape.test.mjs and echo-bench.mjs
// (`--datagram-api safari`). WebKit (Safari 26.4+) has no `writable` getter on
// WebTransportDatagramDuplexStream, only the spec's current `createWritable()`
// (Source/WebCore/Modules/webtransport/WebTransportDatagramDuplexStream.idl); Chromium (156) has
// only the getter. The init script below takes the getter away and adds a `createWritable()`
// that returns what the real getter returns: Chromium's own datagram writable, so datagrams still
// leave through Chromium's QUIC stack and only the API's shape is Safari's.
//
//   await page.addInitScript(safariDatagramShape);
//   ... later: await page.evaluate(() => window.__safariShape)
//     { installed, createWritableCalls }

/// Runs in the page before its scripts (playwright's `addInitScript`, puppeteer's
/// `evaluateOnNewDocument`). `window.__safariShape.installed` is false when this browser had no
/// `writable` getter to take away (the test then fails loudly instead of testing nothing).
export function safariDatagramShape() {
  const shape = { installed: false, createWritableCalls: 0 };
  window.__safariShape = shape;
  const proto = globalThis.WebTransportDatagramDuplexStream?.prototype;
  const getter = proto && Object.getOwnPropertyDescriptor(proto, 'writable')?.get;
  if (!getter) return;
  delete proto.writable;
  Object.defineProperty(proto, 'createWritable', {
    configurable: true,
    writable: true,
    // The spec's signature is createWritable(optional WebTransportSendOptions options = {});
    // the page passes none (send groups and order are not for one datagram writer).
    value: function createWritable() {
      shape.createWritableCalls++;
      return getter.call(this);
    },
  });
  shape.installed = !('writable' in proto);
}
