/** JUnit XML of run.expect verdicts (one testcase per expectation), the format CI services read. */
import type { Verdict } from './expectations';

export const JUNIT_FILE = 'junit.xml';

// The control characters XML 1.0 forbids.
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters to remove
const XML_FORBIDDEN = /[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g;

const escapeXml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]!).replace(XML_FORBIDDEN, '');

export function junitXml(runName: string, verdicts: Verdict[], timestamp = new Date()): string {
  const failures = verdicts.filter((v) => !v.ok).length;
  const suite = `run.expect ${runName}`;
  const cases = verdicts.map((v) => {
    const open = `    <testcase classname="${escapeXml(suite)}" name="${escapeXml(v.name)}" time="0">`;
    if (v.ok) return `${open}\n      <system-out>${escapeXml(v.detail)}</system-out>\n    </testcase>`;
    return `${open}\n      <failure message="${escapeXml(v.detail)}" type="expectation">${escapeXml(v.detail)}</failure>\n    </testcase>`;
  });
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="trainer-ctl" tests="${verdicts.length}" failures="${failures}" errors="0">`,
    `  <testsuite name="${escapeXml(suite)}" tests="${verdicts.length}" failures="${failures}" errors="0" skipped="0" timestamp="${timestamp.toISOString()}">`,
    ...cases,
    '  </testsuite>',
    '</testsuites>',
    '',
  ].join('\n');
}
