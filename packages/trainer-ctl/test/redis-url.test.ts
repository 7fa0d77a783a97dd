/** Redis URLs: where the password comes from, and its redaction wherever a URL is shown. */
import { describe, expect, it } from 'vitest';
import { hasRedactedPassword, redactSecrets, resolveRedisUrl } from '../src/queue/redis-url';

describe('redactSecrets', () => {
  it.each([
    ['ready on redis://:s3cret@10.0.0.5:6379 (run x)', 'ready on redis://:***@10.0.0.5:6379 (run x)'],
    ['redis://alice:pw@h:1/0', 'redis://alice:***@h:1/0'],
    ['rediss://:p@ss:w@h:2', 'rediss://:***@h:2'],
    ['{"redisUrl":"redis://:pw@h:1","b":"x@y"}', '{"redisUrl":"redis://:***@h:1","b":"x@y"}'],
    ["queue: { redis_url: 'redis://:pw@h:1' }", "queue: { redis_url: 'redis://:***@h:1' }"],
    ['two: redis://:a@h:1 and https://u:b@example.com/x@y', 'two: redis://:***@h:1 and https://u:***@example.com/x@y'],
    ['no credentials: redis://h:6379 and alice@example.com', 'no credentials: redis://h:6379 and alice@example.com'],
  ])('%s', (text, redacted) => {
    expect(redactSecrets(text)).toBe(redacted);
  });
});

describe('resolveRedisUrl', () => {
  const env = (e: Record<string, string>) => e as NodeJS.ProcessEnv;
  it('takes --redis, then THINKFL_REDIS_URL, then the configured URL', () => {
    expect(resolveRedisUrl('redis://a:1', 'redis://c:3', env({ THINKFL_REDIS_URL: 'redis://b:2' }))).toBe('redis://a:1');
    expect(resolveRedisUrl(undefined, 'redis://c:3', env({ THINKFL_REDIS_URL: 'redis://b:2' }))).toBe('redis://b:2');
    expect(resolveRedisUrl(undefined, 'redis://c:3', env({}))).toBe('redis://c:3');
    expect(resolveRedisUrl(undefined, null, env({}))).toBeUndefined();
  });

  it('fills in REDIS_PASSWORD, URL-encoded, where the URL has no password or a redacted one', () => {
    expect(resolveRedisUrl('redis://h:1', null, env({ REDIS_PASSWORD: 'p@ss w/:' }))).toBe('redis://:p%40ss%20w%2F%3A@h:1');
    expect(resolveRedisUrl('redis://alice@h:1/2', null, env({ REDIS_PASSWORD: 'pw' }))).toBe('redis://alice:pw@h:1/2');
    expect(resolveRedisUrl(undefined, 'redis://:***@h:1', env({ REDIS_PASSWORD: 'pw' }))).toBe('redis://:pw@h:1');
    expect(resolveRedisUrl('redis://:given@h:1', null, env({ REDIS_PASSWORD: 'pw' }))).toBe('redis://:given@h:1');
    expect(resolveRedisUrl('redis://h:1', null, env({ REDIS_PASSWORD: '' }))).toBe('redis://h:1');
  });

  it('tells a URL read back from run.json that still lacks its password', () => {
    expect(hasRedactedPassword('redis://:***@h:1')).toBe(true);
    expect(hasRedactedPassword('redis://alice:***@h:1')).toBe(true);
    expect(hasRedactedPassword('redis://:pw@h:1')).toBe(false);
    expect(hasRedactedPassword('redis://h:1')).toBe(false);
  });
});
