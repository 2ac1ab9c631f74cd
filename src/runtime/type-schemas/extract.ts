/**
 * JSON schemas of graphs read from their TypeScript types, as the official JS server reads them
 * (`SubgraphExtractor` in langgraphjs `libs/langgraph-api/src/graph/parser/parser.mts`):
 *   1. a first program finds the exported graph and the subgraphs its `addNode` calls name;
 *   2. each graph file gets a virtual twin exporting `typeof <graph>` for each of them, and a
 *      virtual "infer" file applies the reflection helpers of INFER_TEMPLATE to those types;
 *   3. a second program type-checks them and typescript-json-schema turns the reflected
 *      `__update` / `__input` / `__output` / `__config` types into JSON Schema.
 * The graph's state schema is its update type (what a client may send), as the official server's.
 * CPU-heavy (seconds): run it in a worker thread (worker.ts), never on a request.
 */
import path from "node:path";
import ts from "typescript";
import { buildGenerator } from "typescript-json-schema";
import { INFER_TEMPLATE } from "./infer-template.js";

export type JsonSchema = Record<string, unknown>;

/** One graph's schemas, each null when its type says nothing usable. */
export interface TypeGraphSchema {
  state: JsonSchema | null;
  input: JsonSchema | null;
  output: JsonSchema | null;
  config: JsonSchema | null;
}

export interface TypeSchemaTarget {
  /** Absolute path of the graph's file. */
  sourceFile: string;
  /** The export naming the graph (a compiled graph, a builder, or a factory of either). */
  exportSymbol: string;
}

export interface TypeSchemaResult {
  /** Keyed by graph name: the export for the root, `export|node|…` for subgraphs. */
  graphs: Record<string, TypeGraphSchema>;
  /** Project files (outside node_modules) the answer was read from: a change to any invalidates it. */
  files: string[];
}

/** Thrown for a target whose file has no such export (the batch's other targets still answer). */
export class TypeSchemaError extends Error {}

const sanitize = (input: string) => input.replace(/[^a-zA-Z0-9]/g, "_");

interface Subgraph {
  node: string;
  namespace: string[];
  subgraph: { name: string; node: ts.Node };
}

interface TypeExport {
  typeName: string;
  valueName: string;
  graphName: string;
}

/** Finds a graph's subgraphs and writes the augmented files for one target (the official parser's first pass). */
class SubgraphFinder {
  readonly #checker: ts.TypeChecker;
  readonly #anyPregel: ts.Type;
  readonly #anyGraph: ts.Type;

  constructor(
    program: ts.Program,
    private readonly sourceFile: ts.SourceFile,
    private readonly inferFile: ts.SourceFile,
  ) {
    this.#checker = program.getTypeChecker();
    this.#anyPregel = this.#typeByName("AnyPregel");
    this.#anyGraph = this.#typeByName("AnyGraph");
  }

  #typeByName(needle: string): ts.Type {
    let result: ts.Type | undefined;
    const visit = (node: ts.Node) => {
      if (ts.isTypeAliasDeclaration(node)) {
        const symbol = (node as unknown as { symbol?: ts.Symbol }).symbol;
        if (symbol && this.#checker.getFullyQualifiedName(symbol).replace(/".*"\./, "") === needle) {
          result = this.#checker.getTypeAtLocation(node);
        }
      }
      if (!result) ts.forEachChild(node, visit);
    };
    ts.forEachChild(this.inferFile, visit);
    if (!result) throw new Error(`the inference template has no "${needle}" type`);
    return result;
  }

  #text(node: ts.Node): string {
    return node.getText(this.sourceFile);
  }

  #isGraphOrPregel(type: ts.Type): boolean {
    return this.#checker.isTypeAssignableTo(type, this.#anyPregel) || this.#checker.isTypeAssignableTo(type, this.#anyGraph);
  }

  #reduce<A>(node: ts.Node, fn: (acc: A, node: ts.Node) => A, initial: A): A {
    let acc = initial;
    const visit = (child: ts.Node) => {
      acc = fn(acc, child);
      ts.forEachChild(child, visit);
    };
    ts.forEachChild(node, visit);
    return acc;
  }

  #find(root: ts.Node, predicate: (node: ts.Node) => boolean): ts.Node | undefined {
    if (predicate(root)) return root;
    let result: ts.Node | undefined;
    const visit = (node: ts.Node) => {
      if (result) return;
      if (predicate(node)) result = node;
      else ts.forEachChild(node, visit);
    };
    ts.forEachChild(root, visit);
    return result;
  }

  /** Identifiers under `node` that name a graph variable (declared here or imported). */
  #graphIdentifiers = (acc: { node: ts.Node; name: string }[], node: ts.Node) => {
    if (!ts.isIdentifier(node)) return acc;
    const symbol = this.#checker.getSymbolAtLocation(node);
    const decl = symbol?.valueDeclaration;
    if (decl && ts.isVariableDeclaration(decl) && this.#isGraphOrPregel(this.#checker.getTypeAtLocation(decl))) {
      acc.push({ name: this.#text(decl.name), node: decl });
    }
    const imported = symbol?.declarations?.find(ts.isImportSpecifier);
    if (imported && this.#isGraphOrPregel(this.#checker.getTypeAtLocation(imported))) {
      acc.push({ name: this.#text(imported.name), node: imported });
    }
    return acc;
  };

  #subgraphs(node: ts.Node, namespace: string[]): Subgraph[] {
    const addNodeCalls = (acc: Subgraph[], child: ts.Node) => {
      if (!ts.isCallExpression(child)) return acc;
      const callee = child.getChildAt(0);
      if (!ts.isPropertyAccessExpression(callee) || this.#text(callee.name) !== "addNode") return acc;
      const [nameArg, valueArg] = child.arguments;
      let nodeName = "unknown";
      if (nameArg && ts.isStringLiteralLike(nameArg)) nodeName = nameArg.text;
      let found: { node: ts.Node; name: string }[] = [];
      if (valueArg) {
        if (ts.isFunctionLike(valueArg) || ts.isCallLikeExpression(valueArg)) found = this.#reduce(valueArg, this.#graphIdentifiers, []);
        else if (ts.isIdentifier(valueArg)) found = this.#graphIdentifiers([], valueArg);
      }
      // Several graphs invoked from one node: the official parser takes the first (and warns).
      if (found.length > 0) acc.push({ namespace, node: nodeName, subgraph: found[0] });
      return acc;
    };

    let subgraphs = this.#reduce(node, addNodeCalls, []);
    if (subgraphs.length === 0) {
      // No addNode here: follow the control flow to where the graph was built (TypeScript's
      // internal `flowNode`, which ts-ast-viewer and the official parser rely on too).
      type FlowNode = ts.Node & { flowNode?: { node: ts.Node } };
      const candidate = this.#find(node, (n) => Boolean((n as FlowNode).flowNode)) as FlowNode | undefined;
      const target = candidate?.flowNode?.node;
      if (target && this.#isGraphOrPregel(this.#checker.getTypeAtLocation(target))) subgraphs = this.#subgraphs(target, namespace);
    }
    if (subgraphs.length === 0) return subgraphs;
    return [...subgraphs, ...subgraphs.flatMap(({ subgraph, node: name }) => this.#subgraphs(subgraph.node, [...namespace, name]))];
  }

  #exported(name: string): ts.Symbol {
    const moduleSymbol = this.#checker.getSymbolAtLocation(this.sourceFile);
    const exported = moduleSymbol ? this.#checker.getExportsOfModule(moduleSymbol).find((s) => s.name === name) : undefined;
    if (!exported) throw new TypeSchemaError(`${this.sourceFile.fileName} has no export "${name}"`);
    return exported;
  }

  #exportedSubgraphs(exported: ts.Symbol): Subgraph[] {
    return (exported.declarations ?? [])
      .filter(ts.isVariableDeclaration)
      .flatMap((decl) => (decl.initializer ? this.#subgraphs(decl.initializer, [exported.name]) : []));
  }

  /** The virtual source twin and infer file for this target, and the type names they export. */
  augment(relativePath: string, name: string, allowTsExtensions: boolean) {
    const ext = path.extname(relativePath);
    const suffix = relativePath.slice(0, -ext.length);
    const toJs = (file: string) => (allowTsExtensions ? file : file.slice(0, -ext.length) + ext.replace("ts", "js"));
    const exported = this.#exported(name);
    // A re-export (`export { graph } from "./x.js"`, `export { a as graph }`) or a default export
    // binds no local name: the type is taken through the file's own module instead (beyond the
    // official parser, which reads only local variables).
    const local = (exported.declarations ?? []).some((d) => ts.isVariableDeclaration(d) || ts.isFunctionDeclaration(d) || ts.isClassDeclaration(d));
    const rootValue = local ? name : `import("./${toJs(path.basename(relativePath))}").${name}`;
    const exports: TypeExport[] = [{ typeName: sanitize(`__langgraph__${name}_${suffix}`), valueName: rootValue, graphName: name }];
    const seen = new Set<string>();
    for (const { subgraph, node, namespace } of this.#exportedSubgraphs(exported)) {
      if (seen.has(subgraph.name)) continue;
      seen.add(subgraph.name);
      exports.push({
        typeName: sanitize(`__langgraph__${namespace.join("_")}_${node}_${suffix}`),
        valueName: subgraph.name,
        graphName: [...namespace, node].join("|"),
      });
    }

    // Named after the export too: two graphs of one file are two targets of one batch.
    const sourceName = `__langgraph__source_${sanitize(suffix)}_${sanitize(name)}${ext}`;
    const sourceText = [this.sourceFile.getFullText(), ...exports.map((e) => `export type ${e.typeName} = typeof ${e.valueName}`)].join("\n\n");
    const importPath = toJs(sourceName);
    const inferName = `__langgraph__infer_${sanitize(suffix)}_${sanitize(name)}${ext}`;
    const inferText = [
      ...exports.map((e) => `import type { ${e.typeName} } from "./${importPath}"`),
      this.inferFile.getFullText(),
      ...exports.map((e) =>
        [
          `type ${e.typeName}__reflect = Reflect<${e.typeName}>;`,
          `export type ${e.typeName}__state = Inspect<${e.typeName}__reflect["state"]>;`,
          `export type ${e.typeName}__update = Inspect<${e.typeName}__reflect["update"]>;`,
          `type ${e.typeName}__builder = BuilderReflect<${e.typeName}>;`,
          `export type ${e.typeName}__input = Inspect<FilterAny<${e.typeName}__builder["input"]>>;`,
          `export type ${e.typeName}__output = Inspect<FilterAny<${e.typeName}__builder["output"]>>;`,
          `export type ${e.typeName}__config = Inspect<FilterAny<${e.typeName}__builder["config"]>>;`,
        ].join("\n"),
      ),
    ].join("\n\n");
    return { source: { name: sourceName, text: sourceText }, infer: { name: inferName, text: inferText }, exports };
  }
}

/** The directory all targets share (the official parser's project root). */
function commonDir(files: string[]): string {
  return files
    .map((f) => path.dirname(f))
    .reduce((acc, dir) => {
      const a = acc.split(path.sep);
      const b = dir.split(path.sep);
      let i = 0;
      while (i < a.length && i < b.length && a[i] === b[i]) i++;
      return a.slice(0, i).join(path.sep) || path.sep;
    });
}

/** The project's tsconfig (nearest one up from `dir`) under the parser's fixed options. */
function compilerOptionsFor(dir: string): { options: ts.CompilerOptions; tsconfig?: string } {
  const fixed: ts.CompilerOptions = { noEmit: true, strict: true, allowUnusedLabels: true };
  const tsconfig = ts.findConfigFile(dir, ts.sys.fileExists, "tsconfig.json");
  if (!tsconfig) return { options: fixed };
  const read = ts.readConfigFile(tsconfig, ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, path.dirname(tsconfig));
  return { options: { ...parsed.options, ...fixed }, tsconfig };
}

/** A compiler host that also serves the virtual files, and parses each real file once for both programs. */
function hostWith(options: ts.CompilerOptions, virtual: Map<string, string>): ts.CompilerHost {
  const host = ts.createCompilerHost(options, true);
  const parsed = new Map<string, ts.SourceFile | undefined>();
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (file) => virtual.has(file) || fileExists.call(host, file);
  host.readFile = (file) => virtual.get(file) ?? readFile.call(host, file);
  host.getSourceFile = (file, language, onError, shouldCreate) => {
    const text = virtual.get(file);
    if (text !== undefined) return ts.createSourceFile(file, text, language, true);
    if (!parsed.has(file)) parsed.set(file, getSourceFile.call(host, file, language, onError, shouldCreate));
    return parsed.get(file);
  };
  return host;
}

/** A type name's module qualifiers: `import("/abs/path/node_modules/…",{with:{…}}).` */
const MODULE_QUALIFIER = /import\([^()]*\)\./g;

/**
 * Definitions named as the official parser names them: without module qualifiers (which hold
 * this machine's paths), e.g. `BaseMessage<MessageStructure<MessageToolSet>,MessageType>`, and
 * `$ref`s written plainly rather than URI-encoded.
 */
function tidyDefinitions(schema: JsonSchema): JsonSchema {
  const definitions = (schema.definitions ?? {}) as Record<string, unknown>;
  const renamed: Record<string, string> = {};
  for (const key of Object.keys(definitions)) {
    const target = key.replace(MODULE_QUALIFIER, "");
    if (target !== key && definitions[target] === undefined) {
      definitions[target] = definitions[key];
      delete definitions[key];
      renamed[key] = target;
    }
  }
  return JSON.parse(
    JSON.stringify(schema, (key, value) => {
      if (key !== "$ref" || typeof value !== "string" || !value.startsWith("#/definitions/")) return value;
      const name = decodeURIComponent(value.slice("#/definitions/".length));
      return `#/definitions/${renamed[name] ?? name}`;
    }),
  );
}

const TEMPLATE_NAME = "__langgraph__infer_template.mts";

/** Schemas of every target, in order; a target that fails answers its error instead. */
export function extractTypeSchemas(targets: TypeSchemaTarget[]): (TypeSchemaResult | { error: string })[] {
  if (targets.length === 0) return [];
  const projectDir = commonDir(targets.map((t) => t.sourceFile));
  const { options, tsconfig } = compilerOptionsFor(projectDir);
  const virtual = new Map<string, string>();
  const templatePath = path.resolve(projectDir, TEMPLATE_NAME);
  virtual.set(templatePath, INFER_TEMPLATE);
  const host = hostWith(options, virtual);

  const research = ts.createProgram({ rootNames: [templatePath, ...targets.map((t) => t.sourceFile)], options, host });
  type Planned = { inferPath: string; exports: TypeExport[] } | { error: string };
  const planned = targets.map((target): Planned => {
    try {
      const source = research.getSourceFile(target.sourceFile);
      if (!source) throw new TypeSchemaError(`${target.sourceFile} could not be read`);
      const finder = new SubgraphFinder(research, source, research.getSourceFile(templatePath)!);
      const augmented = finder.augment(path.relative(projectDir, target.sourceFile), target.exportSymbol, options.allowImportingTsExtensions ?? false);
      const dir = path.dirname(target.sourceFile);
      virtual.set(path.resolve(dir, augmented.source.name), augmented.source.text);
      const inferPath = path.resolve(dir, augmented.infer.name);
      virtual.set(inferPath, augmented.infer.text);
      return { inferPath, exports: augmented.exports };
    } catch (error) {
      return { error: (error as Error).message };
    }
  });

  const roots = planned.flatMap((p) => ("inferPath" in p ? [p.inferPath] : []));
  if (roots.length === 0) return planned.map((p) => ("error" in p ? p : { error: "no schema" }));
  const extract = ts.createProgram({ rootNames: roots, options, host, oldProgram: research });
  // The generator checks no diagnostics: a graph file with a type error still gets what can be read.
  const generator = buildGenerator(extract, { ignoreErrors: true });
  const schemaOf = (symbol: string): JsonSchema | null => {
    try {
      const schema = generator?.getSchemaForSymbol(symbol) as JsonSchema | undefined;
      return schema ? tidyDefinitions(schema) : null;
    } catch {
      return null;
    }
  };
  const files = extract
    .getSourceFiles()
    .map((f) => f.fileName)
    .filter((f) => !virtual.has(f) && !f.split(/[\\/]/).includes("node_modules") && !extract.isSourceFileDefaultLibrary(extract.getSourceFile(f)!));
  if (tsconfig) files.push(path.resolve(tsconfig));
  // Each graph file was read through its virtual twin: name the real one.
  for (const t of targets) if (!files.includes(t.sourceFile)) files.push(t.sourceFile);

  return planned.map((p) => {
    if ("error" in p) return p;
    const graphs: Record<string, TypeGraphSchema> = {};
    for (const { typeName, graphName } of p.exports) {
      graphs[graphName] = {
        state: schemaOf(`${typeName}__update`),
        input: schemaOf(`${typeName}__input`),
        output: schemaOf(`${typeName}__output`),
        config: schemaOf(`${typeName}__config`),
      };
    }
    return { graphs, files };
  });
}
