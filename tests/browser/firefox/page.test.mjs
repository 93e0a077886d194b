// tests/page.test.mjs, the same test body, in headless Firefox ESR over WebDriver BiDi
// (../lib/firefox.mjs); the tests that need Chromium's driver are skipped there, each saying why.
import { runInFirefox } from '../lib/firefox-run.mjs';

await runInFirefox('page.test.mjs');
