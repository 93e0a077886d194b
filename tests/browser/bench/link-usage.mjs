// Where a bulk transfer's time goes on the emulated link, from linkemu's own counters: the paste
// and download benchmarks start linkemu with `--stats-every` (LINK_STATS_ARGS) and hand its child
// process to `watchLink`, which stamps each counter line as it arrives. `summary` then splits
// "transfer time / link limit" into what the wire costs (IP, UDP and QUIC headers, acks,
// retransmissions: wire bytes over content bytes) and what the sender left idle (the link's
// busy time against the transfer's span), at the start, in the middle and at the end.
// The link limit is the bare rate, so the wire's own overhead is in every ratio; the rest is the
// pacer's (docs/UPLOAD.md) and the hosts'.

/// Bytes of IPv4 + UDP header linkemu's rate counts per datagram (tests/src/linkemu/shaper.rs).
const HEADER = 28;
/// How often linkemu prints its counters; the resolution of the idle figures.
export const STATS_MS = 50;
export const LINK_STATS_ARGS = ['--stats-every', `${STATS_MS}ms`];

/// Bits per second of a linkemu rate such as `9mbit`.
export function rateBitsPerSecond(rate) {
  const m = rate.match(/^([\d.]+)\s*([kmg]?)bit$/i);
  if (!m) throw new Error(`not a link rate: ${rate}`);
  return Number(m[1]) * { '': 1, k: 1e3, m: 1e6, g: 1e9 }[m[2].toLowerCase()];
}

/// Follows a linkemu child's counter lines; `dir` is 'up' (page -> relay) or 'down'.
export function watchLink(child, dir) {
  const points = []; // [ms on performance.now(), datagrams forwarded, payload bytes forwarded]
  let rest = '';
  const re = new RegExp(`${dir}: received=\\d+ forwarded=(\\d+) bytes=(\\d+)`);
  child.stdout.on('data', (d) => {
    const now = performance.now();
    const lines = (rest + d).split('\n');
    rest = lines.pop();
    for (const line of lines) {
      const m = line.match(re);
      if (m) points.push([now, Number(m[1]), Number(m[2])]);
    }
  });
  return { points, now: () => performance.now() };
}

/// The breakdown of a transfer of `contentBytes` at `rateBps` that ran between `t0` and `t1`
/// (performance.now() of this process; `t1` may be a little late, the span is taken from the
/// counters: the first and last interval in which the link carried bulk traffic).
export function summary(watch, { t0, t1, contentBytes, rateBps }) {
  const pts = watch.points.filter(([t]) => t >= t0 - STATS_MS && t <= t1 + 4 * STATS_MS);
  const iv = [];
  for (let i = 1; i < pts.length; i++) {
    const [ta, pa, ba] = pts[i - 1];
    const [tb, pb, bb] = pts[i];
    iv.push({ t: tb, ms: tb - ta, packets: pb - pa, payload: bb - ba, wire: bb - ba + HEADER * (pb - pa) });
  }
  // Bulk: an interval that carried more than a fifth of what the link can. Keystrokes and acks
  // alone never do.
  const full = (x) => (x.wire * 8e3) / rateBps / x.ms; // busy share of the interval
  const bulk = iv.map((x, i) => (full(x) > 0.2 ? i : -1)).filter((i) => i >= 0);
  if (!bulk.length) return null;
  const used = iv.slice(bulk[0], bulk.at(-1) + 1);
  const spanMs = used.reduce((a, x) => a + x.ms, 0);
  const wire = used.reduce((a, x) => a + x.wire, 0);
  const payload = used.reduce((a, x) => a + x.payload, 0);
  const packets = used.reduce((a, x) => a + x.packets, 0);
  const busyMs = (wire * 8e3) / rateBps;
  // Idle time by stretch: the first and the last second, and the middle. Net, not clamped per
  // interval: the lines are stamped on arrival here, so one interval may read over 100 % busy
  // and its neighbour as much under.
  const idleIn = (xs) => xs.reduce((a, x) => a + x.ms - (x.wire * 8e3) / rateBps, 0);
  const n1 = Math.max(1, Math.round(1000 / STATS_MS));
  const limitMs = (contentBytes * 8e3) / rateBps;
  return {
    spanMs, busyMs, idleMs: spanMs - busyMs,
    idleStartMs: idleIn(used.slice(0, n1)),
    idleMiddleMs: idleIn(used.slice(n1, Math.max(n1, used.length - n1))),
    idleEndMs: idleIn(used.slice(Math.max(n1, used.length - n1))),
    // Wire bytes per content byte, minus one: headers, acks, retransmissions, keystrokes.
    overhead: wire / contentBytes - 1,
    packetPayloadMean: payload / Math.max(1, packets),
    // The ratio if the link had never idled (overhead alone), and the share of the limit lost
    // to idling.
    wireRatio: busyMs / limitMs,
    idleRatio: (spanMs - busyMs) / limitMs,
  };
}

/// One line for a benchmark's output.
export function describe(s) {
  if (!s) return 'link usage: no bulk traffic seen';
  const f = (x) => x.toFixed(0);
  return `link: span ${f(s.spanMs)} ms = busy ${f(s.busyMs)} (wire ${(s.wireRatio).toFixed(3)}x the limit: ` +
    `overhead ${(s.overhead * 100).toFixed(1)} %, ${f(s.packetPayloadMean)} B/datagram) + idle ${f(s.idleMs)} ` +
    `(${(s.idleRatio * 100).toFixed(1)} % of the limit: first s ${f(s.idleStartMs)}, middle ${f(s.idleMiddleMs)}, last s ${f(s.idleEndMs)})`;
}
