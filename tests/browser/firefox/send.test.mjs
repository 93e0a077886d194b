// tests/send.test.mjs, the same test body, in headless Firefox ESR over WebDriver BiDi
// (../lib/firefox.mjs); the tests that need Chromium's driver (downloads, routing a new page) are
// skipped there, each saying why.
import { runInFirefox } from '../lib/firefox-run.mjs';

await runInFirefox('send.test.mjs');
