// Renders www/apple-touch-icon.png (180x180, what iOS puts on the home screen) from www/icon.svg
// with headless Chromium: full bleed (the square without its rounded corners, which iOS draws
// itself; a transparent corner would turn black there).
//
//   node scripts/touch-icon.mjs
import { chromium } from 'playwright-core';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const svg = readFileSync(join(root, 'www/icon.svg'), 'utf8').replace(/ rx="[^"]*"/, '');
const size = 180;
const profile = mkdtempSync(join(tmpdir(), 'tern-icon-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  viewport: { width: size, height: size },
  deviceScaleFactor: 1,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
});
try {
  const page = context.pages()[0] ?? await context.newPage();
  const sized = svg.replace('<svg ', `<svg width="${size}" height="${size}" `);
  await page.setContent(`<style>html,body{margin:0}svg{display:block}</style>${sized}`);
  await page.screenshot({ path: join(root, 'www/apple-touch-icon.png'), clip: { x: 0, y: 0, width: size, height: size } });
  console.log('wrote www/apple-touch-icon.png');
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
