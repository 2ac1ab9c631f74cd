import path from "node:path";
import ts from "typescript";

/**
 * Where `files` call the event store's `append` (a method declared under src/eventstore/, reached
 * through any type: the port, an adapter, a decorator), as `file:line`. Resolved by the type
 * checker, so a renamed variable or a destructured store does not hide a call.
 */
export function appendCallers(root: string, files: string[]): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(path.join(root, "tsconfig.json"), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  if (!config) throw new Error("tsconfig.json could not be read");
  const program = ts.createProgram(files, { ...config.options, noEmit: true });
  const checker = program.getTypeChecker();
  const storeDir = path.join(root, "src", "eventstore") + path.sep;
  const found: string[] = [];
  for (const file of files) {
    const source = program.getSourceFile(file);
    if (!source) throw new Error(`${file} is not in the program`);
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === "append") {
        const symbol = checker.getSymbolAtLocation(node.expression.name);
        const declared = symbol?.declarations?.some((d) => path.resolve(d.getSourceFile().fileName).startsWith(storeDir)) ?? false;
        if (declared) found.push(`${path.relative(root, file)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}
