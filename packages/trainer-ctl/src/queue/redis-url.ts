/**
 * Where a run's Redis URL comes from, and how it is shown. The password may come from the
 * environment (REDIS_PASSWORD, or a whole URL in THINKFL_REDIS_URL) so it never has to be on a
 * command line or in a config file; wherever a URL is printed or written it is redacted
 * (`redis://:***@host:port`, `redis://user:***@host:port` for a Redis ACL user).
 */

/** A whole Redis URL, password included; read when no --redis is given. */
export const REDIS_URL_ENV = 'THINKFL_REDIS_URL';
/** The password of the URL's user (the default user, or the ACL user the URL names). */
export const REDIS_PASSWORD_ENV = 'REDIS_PASSWORD';
/** What a redacted password reads as. */
export const REDACTED = '***';

// scheme://user:password@host — as URL parsers read it, the password runs to the last @ before the path.
const CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/[^/\s:@"']*):[^\s/"']*@/gi;

/** Every URL password in `text` replaced by ***; the rest (user, host, port) left as it is. */
export function redactSecrets(text: string): string {
  return text.replace(CREDENTIALS, `$1:${REDACTED}@`);
}

/** `url` with its password redacted. */
export const redactUrl = (url: string): string => redactSecrets(url);

/**
 * The Redis URL to connect to: `flag` (--redis), else THINKFL_REDIS_URL, else `configured`
 * (queue.redis_url, or the redacted URL a run recorded); REDIS_PASSWORD fills in the password
 * when the URL has none or a redacted one. Undefined when none gives a URL.
 */
export function resolveRedisUrl(
  flag: string | undefined,
  configured?: string | null,
  env: NodeJS.ProcessEnv = process.env,
): string | undefined {
  const raw = flag || env[REDIS_URL_ENV] || configured;
  if (!raw) return undefined;
  const password = env[REDIS_PASSWORD_ENV];
  if (!password) return raw;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return raw;
  }
  if (u.password && u.password !== REDACTED) return raw;
  u.password = encodeURIComponent(password);
  return u.toString();
}

/** True when the URL still needs a password it only has in redacted form (a URL read back from run.json). */
export const hasRedactedPassword = (url: string): boolean => {
  try {
    return new URL(url).password === REDACTED;
  } catch {
    return false;
  }
};
