// tests/resume.test.mjs, the same test body, in headless Firefox ESR over WebDriver BiDi
// (../lib/firefox.mjs). Skipped, with the reason printed, when firefox-esr or puppeteer-core is
// missing.
import { runInFirefox } from '../lib/firefox-run.mjs';

await runInFirefox('resume.test.mjs');
