import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * Which Chrome or Chromium the browser tests drive (playwright-core downloads none of its own):
 * `CHROMIUM_PATH` when set, else the first one installed where each platform puts it — on PATH
 * (Debian's `chromium`, `google-chrome`, …), macOS's application bundles, Windows' Program
 * Files. When there is none, the error says what to install on this platform.
 */
export interface BrowserLookup {
  platform: NodeJS.Platform;
  env: Record<string, string | undefined>;
  /** Whether `path` is a file this process may run. */
  isExecutable(path: string): boolean;
}

const COMMANDS = ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable', 'chrome'];

function candidates({ platform, env }: BrowserLookup): string[] {
  const onPath = (env.PATH ?? '')
    .split(delimiter)
    .filter(Boolean)
    .flatMap((dir) => COMMANDS.map((command) => join(dir, platform === 'win32' ? `${command}.exe` : command)));
  if (platform === 'darwin') {
    const apps = ['Google Chrome.app/Contents/MacOS/Google Chrome', 'Chromium.app/Contents/MacOS/Chromium'];
    return [
      ...apps.map((app) => `/Applications/${app}`),
      ...(env.HOME ? apps.map((app) => `${env.HOME}/Applications/${app}`) : []),
      ...onPath,
    ];
  }
  if (platform === 'win32') {
    const roots = [env.PROGRAMFILES, env['PROGRAMFILES(X86)'], env.LOCALAPPDATA].filter((root): root is string => Boolean(root));
    return [...roots.map((root) => join(root, 'Google', 'Chrome', 'Application', 'chrome.exe')), ...onPath];
  }
  return onPath;
}

const INSTALL_HINTS: Partial<Record<NodeJS.Platform, string>> = {
  linux: "on Debian or Ubuntu `sudo apt-get install -y chromium`; elsewhere your distribution's chromium or Google Chrome",
  darwin: 'Google Chrome (https://www.google.com/chrome/) or `brew install --cask chromium`',
  win32: 'Google Chrome (https://www.google.com/chrome/)',
};

export function findBrowser(lookup: BrowserLookup): string {
  const named = lookup.env.CHROMIUM_PATH;
  if (named) {
    if (!lookup.isExecutable(named)) throw new Error(`CHROMIUM_PATH is ${named}, which is not an executable file`);
    return named;
  }
  const found = candidates(lookup).find((path) => lookup.isExecutable(path));
  if (found) return found;
  const hint = INSTALL_HINTS[lookup.platform] ?? 'Google Chrome or Chromium';
  throw new Error(
    `The browser tests need Chrome or Chromium, and none was found. Install ${hint}, or set CHROMIUM_PATH to its executable.`,
  );
}

/** This machine's browser. */
export function installedBrowser(): string {
  return findBrowser({
    platform: process.platform,
    env: process.env,
    isExecutable: (path) => {
      try {
        accessSync(path, constants.X_OK);
        return true;
      } catch {
        return false;
      }
    },
  });
}
