/** Keys in camelCase anywhere in a JSON value, each as its path: what crosses a boundary is snake_case (issue 28). */
export function camelCaseKeys(value: unknown, path: string): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => camelCaseKeys(v, `${path}[${i}]`));
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([k, v]) => [
    ...(/[a-z0-9][A-Z]/.test(k) ? [`${path}.${k}`] : []),
    ...camelCaseKeys(v, `${path}.${k}`),
  ]);
}
