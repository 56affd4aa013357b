import { describe, expect, it } from 'vitest';
import { type BrowserLookup, findBrowser } from '../browser/find-browser.js';

/** Where the browser tests look for Chrome or Chromium on each platform, and what they say when there is none. */
const lookup = (platform: NodeJS.Platform, env: Record<string, string>, installed: string[]): BrowserLookup => ({
  platform,
  env,
  isExecutable: (path) => installed.includes(path),
});

describe('finding a browser for the browser tests', () => {
  it.each([
    ['Debian chromium on PATH', lookup('linux', { PATH: '/usr/local/bin:/usr/bin' }, ['/usr/bin/chromium']), '/usr/bin/chromium'],
    ['Google Chrome on PATH', lookup('linux', { PATH: '/usr/bin:/opt/bin' }, ['/opt/bin/google-chrome']), '/opt/bin/google-chrome'],
    [
      'Chrome in /Applications on macOS',
      lookup('darwin', { PATH: '/usr/bin', HOME: '/Users/ana' }, ['/Applications/Google Chrome.app/Contents/MacOS/Google Chrome']),
      '/Applications/Google Chrome.app/Contents/MacOS/Google Chrome',
    ],
    [
      'Chromium in ~/Applications on macOS',
      lookup('darwin', { PATH: '/usr/bin', HOME: '/Users/ana' }, ['/Users/ana/Applications/Chromium.app/Contents/MacOS/Chromium']),
      '/Users/ana/Applications/Chromium.app/Contents/MacOS/Chromium',
    ],
    [
      'CHROMIUM_PATH before anything installed',
      lookup('linux', { PATH: '/usr/bin', CHROMIUM_PATH: '/opt/c/chrome' }, ['/usr/bin/chromium', '/opt/c/chrome']),
      '/opt/c/chrome',
    ],
  ])('finds %s', (_name, given, expected) => {
    expect(findBrowser(given)).toBe(expected);
  });

  it('refuses a CHROMIUM_PATH that is not there, naming it', () => {
    expect(() => findBrowser(lookup('linux', { PATH: '/usr/bin', CHROMIUM_PATH: '/nowhere/chrome' }, ['/usr/bin/chromium']))).toThrow(
      'CHROMIUM_PATH is /nowhere/chrome, which is not an executable file',
    );
  });

  it.each([
    ['darwin', /Install Google Chrome .* or `brew install --cask chromium`, or set CHROMIUM_PATH/],
    ['linux', /Install on Debian or Ubuntu `sudo apt-get install -y chromium`/],
    ['win32', /Install Google Chrome/],
  ] as const)('says what to install on %s when there is none', (platform, message) => {
    expect(() => findBrowser(lookup(platform, { PATH: '/usr/bin' }, []))).toThrow(message);
  });
});
