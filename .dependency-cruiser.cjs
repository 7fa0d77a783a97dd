/**
 * The layering as rules (npm run deps:check). Packages depend downward only:
 * env <- graders, rollout <- trainer-ctl; graders and rollout do not know each other.
 */
const pkg = (name) => `^packages/${name}/`;

/** Package -> the packages it may import (through their package name or a relative path). */
const allowed = {
  env: [],
  graders: ['env'],
  rollout: ['env'],
  'trainer-ctl': ['env', 'graders', 'rollout'],
};
const packages = Object.keys(allowed);

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Modules import in one direction: a circle (type-only imports included) has no module to read first.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-folder-circular',
      comment: 'Folders import in one direction too: a folder whose modules import a folder that imports it back is one unit in two places.',
      severity: 'error',
      scope: 'folder',
      from: { path: '^packages/' },
      to: { circular: true },
    },
    ...packages.map((name) => ({
      name: `${name}-imports-down`,
      comment: `packages/${name} may import only ${allowed[name].join(', ') || 'no other package'}.`,
      severity: 'error',
      from: { path: `${pkg(name)}src/` },
      to: {
        path: '^packages/',
        pathNot: [pkg(name), ...allowed[name].map(pkg)],
      },
    })),
    ...['^(.+)/[^/]+/[^/]+$', '^(.+)/[^/]+/[^/]+/[^/]+$'].map((from, i) => ({
      name: `no-barrel-of-an-ancestor-${i + 1}`,
      comment: 'A folder does not import back up through the barrel (index.ts) of a folder that holds it.',
      severity: 'error',
      from: { path: from },
      to: { path: '^$1/index\\.ts$' },
    })),
    {
      name: 'src-not-test',
      comment: 'Product source does not import tests, their fixtures or the test kit.',
      severity: 'error',
      from: { path: '^packages/[^/]+/src/' },
      to: { path: ['^packages/[^/]+/test/', '^testkit/'] },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import that resolves to no file.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['node_modules', '^\\.cache/'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    combinedDependencies: true,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.mjs', '.js', '.json'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
