// frames.test.mjs, the same test body, in headless Firefox ESR over WebDriver BiDi (./firefox.mjs).
// Skipped, with the reason printed, when firefox-esr or puppeteer-core is missing.
import { runInFirefox } from './firefox-run.mjs';

await runInFirefox('./frames.test.mjs');
