// tests/security.test.mjs, the same test body, in headless Firefox ESR over WebDriver BiDi
// (../lib/firefox.mjs): the page's policy (connect-src to ws and to WebTransport on the relay's
// port), the framing and the foreign handshakes as Firefox does them. Skipped, with the reason
// printed, when firefox-esr or puppeteer-core is missing.
import { runInFirefox } from '../lib/firefox-run.mjs';

await runInFirefox('security.test.mjs');
