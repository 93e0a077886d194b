// Runs one of the test files of tests/browser/tests/ in Firefox: sets TERN_BROWSER=firefox
// (helpers.launchBrowser(), and so the fixture, then starts Firefox) and imports the file, whose
// tests register with node:test as usual. When Firefox cannot run here, registers one skipped test
// whose reason names what is missing, and prints it: never a silent pass.
import { test } from 'node:test';
import { firefoxUnavailable, firefoxVersion } from './firefox.mjs';

/// `file`: its name in tests/browser/tests/ (`session.test.mjs`).
export async function runInFirefox(file) {
  const why = firefoxUnavailable();
  if (why) {
    console.log(`# Firefox tests of ${file} SKIPPED: ${why}`);
    test(`${file} in Firefox`, { skip: why }, () => {});
    return;
  }
  process.env.TERN_BROWSER = 'firefox';
  console.log(`# ${file} in ${firefoxVersion()}`);
  await import(new URL(`../tests/${file}`, import.meta.url));
}
