// tests/phone.test.mjs in headless Firefox ESR: what an installed app needs (the manifest, its
// icons, iOS's meta tags) runs; the phone emulation tests need Chromium's driver and say so.
import { runInFirefox } from '../lib/firefox-run.mjs';

await runInFirefox('phone.test.mjs');
