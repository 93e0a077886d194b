// tests/keyboard.test.mjs, the same test body, in headless Firefox ESR over WebDriver BiDi
// (../lib/firefox.mjs): the iPad's keys are KeyboardEvents made in the page with the iPad's
// keyCode (BiDi's key actions cannot set one); the composition test needs CDP's IME calls and is
// skipped there, saying so.
import { runInFirefox } from '../lib/firefox-run.mjs';

await runInFirefox('keyboard.test.mjs');
