/** YAML text parsed with node ranges kept, so a YAML path can be traced back to its line. */
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from 'yaml';
import { ConfigError } from './errors';

export type YamlPath = readonly (string | number)[];

export interface YamlSource {
  file: string;
  data: unknown;
  /**
   * Line of the node at `path`: of its key when `key` is set (where an unknown key is written),
   * else of its value; falls back to the nearest ancestor present in the file.
   */
  lineOf(path: YamlPath, key?: boolean): number | undefined;
}

function child(node: unknown, seg: string | number): { key?: Node; value?: Node } | undefined {
  if (isMap(node)) {
    const pair = node.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === seg);
    return pair ? { key: pair.key as Node, value: (pair.value ?? pair.key) as Node } : undefined;
  }
  if (isSeq(node) && typeof seg === 'number') {
    const item = node.items[seg] as Node | undefined;
    return item ? { value: item } : undefined;
  }
  return undefined;
}

export function parseYamlSource(text: string, file: string): YamlSource {
  const lines = new LineCounter();
  const doc: Document = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      file,
      doc.errors.map((e) => ({ path: '', line: lines.linePos(e.pos[0]).line, message: `YAML syntax: ${e.message.split('\n')[0]}` })),
    );
  }
  const lineAt = (n: Node | undefined) => (n?.range ? lines.linePos(n.range[0]).line : undefined);
  return {
    file,
    data: doc.toJS({ maxAliasCount: 1000 }),
    lineOf(path, key = false) {
      let node: unknown = doc.contents;
      let line = lineAt(doc.contents as Node | undefined);
      for (let i = 0; i < path.length; i++) {
        const c = child(node, path[i]);
        if (!c) return line;
        const last = i === path.length - 1;
        line = lineAt(last && key && c.key ? c.key : c.value) ?? line;
        node = c.value;
      }
      return line;
    },
  };
}
